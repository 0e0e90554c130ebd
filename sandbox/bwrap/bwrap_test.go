//go:build linux

package bwrap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// newProvider returns a provider on a private root and cgroup parent, or
// skips (fails under FLOWBOX_TEST_REQUIRE=bwrap) when bwrap cannot run.
func newProvider(t *testing.T) *bwrap.Provider {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	return p
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider { return newProvider(t) },
		Processes: func(t *testing.T, p sandbox.Provider, id string) []string {
			pids, err := p.(*bwrap.Provider).Processes(id)
			if err != nil {
				t.Fatalf("Processes: %v", err)
			}
			var out []string
			for _, pid := range pids {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
			}
			return out
		},
		Leftovers: func(t *testing.T, p sandbox.Provider, id string) []string {
			var left []string
			for _, ctl := range []string{"memory", "pids", "cpu"} {
				d := filepath.Join("/sys/fs/cgroup", ctl, "flowbox-test", id)
				if _, err := os.Stat(d); err == nil {
					left = append(left, d)
				}
			}
			list, _ := p.List(context.Background())
			for _, r := range list {
				if r.ID == id {
					left = append(left, "directory of "+id)
				}
			}
			return left
		},
	})
}
