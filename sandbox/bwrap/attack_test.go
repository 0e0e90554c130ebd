//go:build linux

package bwrap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestAttackHostRoot is the rest of finding 2 (T2): the sandbox's root
// was the host's root (uid_map "0 0 1"), so a process that got out of its
// namespaces would have been root on the host. Now every process of a
// sandbox, on both paths, is an unprivileged host user, one per sandbox;
// the sandbox still owns its files (ID-mapped: root's on disk), also those
// the engine wrote.
func TestAttackHostRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes get host users of their own only when the engine is root")
	}
	for _, path := range []string{"per-command", "namespace"} {
		t.Run(path, func(t *testing.T) {
			// A root that does not exist yet, as on an engine's first
			// start: the users must be mapped from the start.
			cfg := bwrap.Config{Root: filepath.Join(t.TempDir(), "first-start", "bwrap"), CgroupParent: "flowbox-test"}
			if path == "namespace" {
				cfg.AgentBinary = testenv.EngineBinary(t)
			}
			p, err := bwrap.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			hostUsers := map[string]string{}
			for range 2 {
				id := sandboxtest.NewID(t)
				if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
				if path == "namespace" {
					if _, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "true"}); err != nil {
						t.Fatal(err)
					}
					waitAgent(t, p, cfg.Root, id)
				}
				// A file the engine writes, as root, for the sandbox to change.
				files, err := p.Files(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if err := files.WriteFile(ctx, "/workspace/upload/report.txt", []byte("engine\n")); err != nil {
					t.Fatal(err)
				}
				running := make(chan sandbox.ExecResult, 1)
				go func() {
					res, err := p.Exec(ctx, id, sandbox.ExecRequest{
						Command: "echo sandbox >> upload/report.txt && touch upload/new && mkdir -p made/deep && id -u && sleep 3",
						Timeout: time.Minute,
					})
					if err != nil {
						t.Error(err)
					}
					running <- res
				}()
				var seen []string
				for deadline := time.Now().Add(30 * time.Second); len(seen) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					pids, _ := p.Processes(id)
					for _, pid := range pids {
						if uid := hostUID(t, pid); uid != "" {
							seen = append(seen, uid)
						}
					}
				}
				res := <-running
				if res.ExitCode != 0 || res.Stdout != "0\n" {
					t.Fatalf("the command: exit %d, stdout %q, stderr %q; want exit 0 and root inside", res.ExitCode, res.Stdout, res.Stderr)
				}
				if len(seen) == 0 {
					t.Fatal("no process of the sandbox seen")
				}
				for _, uid := range seen {
					if uid == "0" || uid != seen[0] {
						t.Fatalf("the sandbox's processes run as host users %v: want one, not root", seen)
					}
				}
				for other, uid := range hostUsers {
					if uid == seen[0] {
						t.Errorf("sandboxes %s and %s run as the same host user %s", other, id, uid)
					}
				}
				hostUsers[id] = seen[0]
				// The engine's view: root's files, the sandbox's changes in them.
				ws := filepath.Join(cfg.Root, id, "workspace")
				if b, _ := os.ReadFile(filepath.Join(ws, "upload", "report.txt")); string(b) != "engine\nsandbox\n" {
					t.Errorf("the engine's file after the sandbox appended: %q", b)
				}
				for _, f := range []string{"upload/new", "made/deep"} {
					fi, err := os.Stat(filepath.Join(ws, f))
					if err != nil {
						t.Fatal(err)
					}
					if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
						t.Errorf("%s is owned by %d:%d on the host; want root's, as the engine's files are", f, st.Uid, st.Gid)
					}
				}
			}
		})
	}
}

// hostUID is the real uid of process pid as the host sees it ("" when
// it is gone).
func hostUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}
