package testenv

import (
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

var engineBuild struct {
	once sync.Once
	path string
	err  error
}

// EngineBinary returns a static engine binary (CGO_ENABLED=0 go build
// ./cmd/engine) for tests that run its commands inside sandboxes (the
// command agent, the egress forwarder): a test binary has none of them.
// It is built from this module once per test binary (the first build may
// take a minute) and kept at one path in the temporary directory,
// replaced atomically by each build, so that a Docker daemon on this
// machine sees it at the same path.
func EngineBinary(t testing.TB) string {
	t.Helper()
	engineBuild.once.Do(func() { engineBuild.path, engineBuild.err = buildEngine() })
	if engineBuild.err != nil {
		t.Fatalf("testenv: build the engine: %v", engineBuild.err)
	}
	return engineBuild.path
}

func buildEngine() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := filepath.Join(os.TempDir(), "flowbox-dockertest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "flowbox-agent-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(goBin, "build", "-o", tmp.Name(), "./cmd/engine")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("CGO_ENABLED=0 go build ./cmd/engine: %w\n%s", err, out)
	}
	path := filepath.Join(dir, "flowbox-agent")
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
