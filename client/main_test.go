package client_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/bwrap"
)

// TestMain stops the embedded database the test binary shares once every
// test has run. The examples need bwrap and cannot skip by themselves, so
// they are left out, with the reason, on a machine without it.
func TestMain(m *testing.M) {
	if why := bwrapMissing(); why != nil && !testenv.Required("bwrap") {
		fmt.Fprintf(os.Stderr, "bwrap unavailable, skipping the examples: %v\n", why)
		_ = flag.Set("test.skip", "^Example")
	}
	mongotest.Main(m)
}

func bwrapMissing() error {
	root, err := os.MkdirTemp("", "flowbox-client-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	p, err := bwrap.New(bwrap.Config{Root: root})
	if err != nil {
		return err
	}
	return p.Fingerprint(context.Background())
}

// startEngine serves a real engine for one example, with one user, and
// returns its address, the user's API key and what stops it all.
// Examples have no *testing.T; exampleTB stands in for one.
func startEngine() (baseURL, key string, stop func()) {
	tb := &exampleTB{}
	defer func() {
		if r := recover(); r != nil {
			tb.cleanup()
			if f, ok := r.(tbStop); ok {
				panic("start the example's engine: " + string(f))
			}
			panic(r)
		}
	}()
	env := enginetest.Start(tb, enginetest.Options{})
	key = env.APIKey(tb, env.CreateUser(tb, "example", auth.RoleUser))
	return env.URL, key, tb.cleanup
}

// exampleTB is the part of testing.TB that enginetest uses, for code
// outside a test. A failure or a skip panics with tbStop, which
// startEngine reports; any other method panics through the nil TB.
type exampleTB struct {
	testing.TB
	cleanups []func()
	failed   bool
}

type tbStop string

func (tb *exampleTB) Helper()          {}
func (tb *exampleTB) Name() string     { return "Example" }
func (tb *exampleTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }
func (tb *exampleTB) Failed() bool     { return tb.failed }

func (tb *exampleTB) TempDir() string {
	dir, err := os.MkdirTemp("", "flowbox-client-example-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (tb *exampleTB) Errorf(format string, args ...any) {
	tb.failed = true
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (tb *exampleTB) Fatal(args ...any) { tb.failed = true; panic(tbStop(fmt.Sprint(args...))) }
func (tb *exampleTB) Fatalf(format string, args ...any) {
	tb.failed = true
	panic(tbStop(fmt.Sprintf(format, args...)))
}
func (tb *exampleTB) Skipf(format string, args ...any) { panic(tbStop(fmt.Sprintf(format, args...))) }

// cleanup runs the cleanups last first, as testing does.
func (tb *exampleTB) cleanup() {
	for _, f := range slices.Backward(tb.cleanups) {
		f()
	}
	tb.cleanups = nil
}
