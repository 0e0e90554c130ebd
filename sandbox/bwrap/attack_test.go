//go:build linux

package bwrap_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// TestAttackAgentSocketReplaced is finding 3's second half (T3): a
// process in the sandbox replaced the agent's socket with its own and
// forged exit code 0 for a command that exited 3, and the audit recorded
// a success. The engine now has the agent prove the namespace's token: the
// forger is refused, the sandbox's processes are ended, and the command
// runs for real.
func TestAttackAgentSocketReplaced(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Need(t, "python3", err)
	}
	cfg := bwrap.Config{AgentBinary: testenv.EngineBinary(t), Root: t.TempDir(), CgroupParent: "flowbox-test"}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	id := sandboxtest.NewID(t)
	workspace := filepath.Join(cfg.Root, id, "workspace")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	if _, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, p, cfg.Root, id)
	if err := os.WriteFile(filepath.Join(workspace, "fake.py"), []byte(sandboxtest.FakeAgent), 0o644); err != nil {
		t.Fatal(err)
	}

	forger := make(chan error, 1)
	go func() {
		_, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "python3 fake.py", Timeout: time.Minute})
		forger <- err
	}()
	ready := filepath.Join(workspace, "fake-ready")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the forger did not start listening")
		}
	}

	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "echo real; exit 3", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("the command after the socket was replaced: %v", err)
	}
	if res.ExitCode != 3 || strings.Contains(res.Stdout, "forged") || res.Stdout != "real\n" {
		t.Fatalf("the command after the socket was replaced: exit %d, stdout %q; want exit 3 and \"real\" (a forged answer was taken)", res.ExitCode, res.Stdout)
	}
	select {
	case <-forger:
	case <-time.After(30 * time.Second):
		t.Fatal("the forger still runs: the sandbox's processes were not ended")
	}
	// The sandbox goes on: the next commands get a namespace of their own
	// again, with the files the forger left.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "ls fake-ready", Timeout: 30 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("a command after the attack: %+v, %v", res, err)
		}
		if len(agentPids(t, p, id)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no namespace started again after the attack")
		}
	}
}

// TestAttackPrivilege is finding 2 (T2): inside a sandbox there was no
// seccomp filter, and `unshare -Un --keep-caps` gave full capabilities in
// a nested user namespace, where a veth pair, an iptables rule and a tmpfs
// mount all succeeded. Now the filter is loaded with no_new_privs, no
// capability is held, and no namespace can be made; ordinary work (files,
// threads, processes, pipes) goes on. Run on both paths: a command's own
// bwrap, and the namespace's agent.
func TestAttackPrivilege(t *testing.T) {
	for _, withAgent := range []bool{false, true} {
		t.Run(map[bool]string{false: "per-command", true: "namespace"}[withAgent], func(t *testing.T) {
			cfg := bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"}
			if withAgent {
				cfg.AgentBinary = testenv.EngineBinary(t)
			}
			p, err := bwrap.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
			id := sandboxtest.NewID(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
			exec := func(command string) sandbox.ExecResult {
				t.Helper()
				res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: command, Timeout: 30 * time.Second})
				if err != nil {
					t.Fatalf("%s: %v", command, err)
				}
				return res
			}
			if withAgent {
				exec("true")
				waitAgent(t, p, cfg.Root, id)
			}
			status := exec("grep -E '^(Seccomp|NoNewPrivs|CapEff|CapPrm|CapBnd):' /proc/self/status").Stdout
			for _, want := range []string{"Seccomp:\t2", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000"} {
				if !strings.Contains(status, want) {
					t.Errorf("/proc/self/status lacks %q:\n%s", want, status)
				}
			}
			for _, attack := range []string{
				"unshare -U true",
				"unshare -Un --keep-caps true",
				"unshare -m true",
				"mount -t tmpfs none /tmp",
				"python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)'",
			} {
				if res := exec(attack); res.ExitCode == 0 {
					t.Errorf("%q succeeded in the sandbox (stdout %q, stderr %q)", attack, res.Stdout, res.Stderr)
				}
			}
			// What every program does still works.
			legit := `set -e; echo data > f; cat f | wc -c; (sleep 0.1 &) ; wait; ` +
				`python3 -c 'import threading, subprocess; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join(); print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())'`
			if res := exec(legit); res.ExitCode != 0 || res.Stdout != "5\nthread\nchild\n" {
				t.Errorf("ordinary work in the sandbox: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

// TestProcOneShowsNoHostPath: bwrap's init is the sandbox's PID 1, and its
// command line showed the host's paths (the data directory, the sandbox's
// directories). Its options now come from a descriptor.
func TestProcOneShowsNoHostPath(t *testing.T) {
	cfg := bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	id := sandboxtest.NewID(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "tr '\\0' ' ' < /proc/1/cmdline", Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read /proc/1/cmdline: %+v, %v", res, err)
	}
	if strings.Contains(res.Stdout, cfg.Root) || !strings.Contains(res.Stdout, "bwrap") {
		t.Fatalf("/proc/1/cmdline in the sandbox = %q; it names the host's directory %s", res.Stdout, cfg.Root)
	}
}
