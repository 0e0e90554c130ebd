package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// TestAttackAgentSocketReplaced is finding 3's second half (T3) on
// Docker: a process in the container replaces the agent's socket and
// forges exit code 0. The agent proves the sandbox's token; the forger
// cannot, so its answers are never taken, and the token itself is nowhere
// a command can read it.
func TestAttackAgentSocketReplaced(t *testing.T) {
	cfg := pathConfig(t, true)
	cfg.Image, cfg.Shell = dockertest.SandboxImage(t), docker.DefaultShell
	e := newEnv(t, cfg)
	id := e.started(t, sandbox.Spec{})
	if res := e.run(t, id, "ls -a /.flowbox-run; cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c FLOWBOX_AGENT_TOKEN", 10*time.Second); strings.Contains(res.Stdout, "token") || !strings.HasSuffix(res.Stdout, "0\n") {
		t.Fatalf("the agent's token is within the sandbox's reach: %q", res.Stdout)
	}
	workspace := filepath.Join(e.root, id, "workspace")
	if err := os.WriteFile(filepath.Join(workspace, "fake.py"), []byte(sandboxtest.FakeAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		_, _ = e.p.Exec(ctx, id, sandbox.ExecRequest{Command: "python3 fake.py", Timeout: time.Minute})
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(workspace, "fake-ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the forger did not start listening")
		}
	}
	res := e.run(t, id, "echo real; exit 3", 30*time.Second)
	if res.ExitCode != 3 || res.Stdout != "real\n" {
		t.Fatalf("the command after the socket was replaced: exit %d, stdout %q; want exit 3 and \"real\" (a forged answer was taken)", res.ExitCode, res.Stdout)
	}
}
