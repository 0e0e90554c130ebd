package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

type build struct {
	// env names a prebuilt binary (scripts/test builds both once, before
	// the test binaries run, instead of each test binary linking its own).
	env  string
	once sync.Once
	path string
	err  error
}

var (
	engineBuild = build{env: "FLOWBOX_TEST_ENGINE_BINARY"}
	agentBuild  = build{env: "FLOWBOX_TEST_AGENT_BINARY"}
)

// EngineBinary returns a static engine binary (CGO_ENABLED=0 go build
// ./cmd/engine) for tests that run its commands inside sandboxes (the
// command agent, the egress forwarder): a test binary has none of them.
// FLOWBOX_TEST_ENGINE_BINARY names one built already (scripts/test builds
// it once for all test binaries); else it is built from this module once
// per test binary (the first build may take a minute) and kept at one
// path in the temporary directory, replaced atomically by each build, so
// that a Docker daemon on this machine sees it at the same path.
func EngineBinary(t testing.TB) string { return engineBuild.get(t, "./cmd/engine", "flowbox-engine") }

// AgentBinary returns the static agent-only binary (./cmd/flowbox-agent),
// which the engine runs as the sandboxes' command agent when it lies
// beside it; named by FLOWBOX_TEST_AGENT_BINARY, or built and kept as
// EngineBinary is.
func AgentBinary(t testing.TB) string {
	return agentBuild.get(t, "./cmd/flowbox-agent", "flowbox-agent")
}

func (b *build) get(t testing.TB, pkg, name string) string {
	t.Helper()
	b.once.Do(func() {
		if p := os.Getenv(b.env); p != "" {
			b.path = p
			if _, err := os.Stat(p); err != nil {
				b.err = fmt.Errorf("%s names %s: %w", b.env, p, err)
			}
			return
		}
		b.path, b.err = buildStatic(pkg, name)
	})
	if b.err != nil {
		t.Fatalf("testenv: build %s: %v", pkg, b.err)
	}
	return b.path
}

func buildStatic(pkg, name string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// One directory per checkout: test processes of another checkout
	// (another CI run on this machine) build their own binaries.
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "flowbox-dockertest", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, name+"-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(goBin, "build", "-o", tmp.Name(), pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build %s: %w\n%s", pkg, err, out)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// moduleRoot is the flowbox module's directory, above the test's.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/flowbox/flowbox\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the flowbox module's root is not above the working directory")
		}
		dir = parent
	}
}
