//go:build linux

package bwrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/diskimage"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// poolMember makes the writable mount directories of a pool member under
// a directory of their own, and a skills directory holding skill.
func poolMember(t *testing.T, skill string) (root string, mounts []sandbox.Mount) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "member")
	skills := filepath.Join(t.TempDir(), "skills")
	for _, dir := range []string{filepath.Join(root, "uploads"), filepath.Join(root, "intermediate"), skills} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(skills, skill), []byte("# skill\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, []sandbox.Mount{
		{Source: filepath.Join(root, "uploads"), Target: sandbox.UploadsDir},
		{Source: filepath.Join(root, "intermediate"), Target: sandbox.IntermediateDir},
		{Source: skills, Target: sandbox.SkillsDir, ReadOnly: true},
	}
}

// moveMember does what the caller of Adopt does: it moves the member's
// directories to the chat's place, leaves a link behind, and returns the
// chat's mounts (the skills as they were).
func moveMember(t *testing.T, root string, mounts []sandbox.Mount) []sandbox.Mount {
	t.Helper()
	chat := filepath.Join(t.TempDir(), "chat")
	if err := os.Rename(root, chat); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(chat, root); err != nil {
		t.Fatal(err)
	}
	out := []sandbox.Mount{
		{Source: filepath.Join(chat, "uploads"), Target: sandbox.UploadsDir},
		{Source: filepath.Join(chat, "intermediate"), Target: sandbox.IntermediateDir},
	}
	return append(out, mounts[2:]...)
}

func listedAs(t *testing.T, p *bwrap.Provider, id string) (sandbox.Resource, bool) {
	t.Helper()
	list, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.ID == id {
			return r, true
		}
	}
	return sandbox.Resource{}, false
}

// TestPoolAdoptNamespace: a pool member's namespace runs once Ensure
// returned; Adopt hands that very namespace, its cgroups and its
// workspace's filesystem to the chat's id, so that the chat's first
// command runs through the agent; refused adoptions touch nothing; and
// Delete leaves no mount of either name.
func TestPoolAdoptNamespace(t *testing.T) {
	bin := testenv.EngineBinary(t)
	cfg := bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: bin}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	ctx := context.Background()
	poolID, id, taken := sandboxtest.NewID(t), sandboxtest.NewID(t), sandboxtest.NewID(t)
	for _, name := range []string{poolID, id, taken} {
		t.Cleanup(func() { p.Delete(context.Background(), name) })
	}
	root, mounts := poolMember(t, "summarise.md")
	lim := sandbox.Limits{DiskGiB: 1}
	if err := p.Ensure(ctx, sandbox.Spec{ID: poolID, Pool: true, Limits: lim, Mounts: mounts}); err != nil {
		t.Fatal(err)
	}
	// Started by Ensure, not by a first command.
	agents := agentPids(t, p, poolID)
	if len(agents) != 1 {
		all, _ := p.Processes(poolID)
		t.Fatalf("a pool member's agent after Ensure: %v, want one; its processes: %v", agents, cmdlines(all))
	}

	// Refused: the name is taken; the member is not a pool member's.
	takenLabels := map[string]string{"chatId": "taken"}
	if err := p.Ensure(ctx, sandbox.Spec{ID: taken, Labels: takenLabels}); err != nil {
		t.Fatal(err)
	}
	if err := p.Adopt(ctx, poolID, sandbox.Spec{ID: taken, Limits: lim, Mounts: mounts}); err == nil || errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Adopt onto an existing sandbox: %v, want an error other than not found", err)
	}
	if err := p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Network: true, Limits: lim, Mounts: mounts}); err == nil || errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Adopt of a member without the network for a spec with it: %v, want an error other than not found", err)
	}
	if err := p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Mounts: mounts}); err == nil || errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Adopt of a member with a disk limit for a spec without: %v, want an error other than not found", err)
	}
	if err := p.Adopt(ctx, taken, sandbox.Spec{ID: id}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Adopt of a sandbox that is no pool member: %v, want not found", err)
	}
	if r, ok := listedAs(t, p, taken); !ok || r.Pool || r.Labels["chatId"] != "taken" {
		t.Errorf("the sandbox an adoption was refused: %+v (found %v)", r, ok)
	}
	if r, ok := listedAs(t, p, poolID); !ok || !r.Pool {
		t.Errorf("the member after refused adoptions: %+v (found %v), want it listed as a pool member", r, ok)
	}
	if now := agentPids(t, p, poolID); len(now) != 1 || now[0] != agents[0] {
		t.Errorf("the member's agent after refused adoptions: %v, want still %v", now, agents)
	}

	// A failure midway (a file where a mount point goes) undoes the
	// renames: the member is as it was.
	if err := os.WriteFile(filepath.Join(cfg.Root, poolID, "disk", "workspace", "extra"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	extra := append(slices.Clone(mounts), sandbox.Mount{Source: t.TempDir(), Target: sandbox.WorkspaceDir + "/extra"})
	if err := p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Limits: lim, Mounts: extra}); err == nil || !strings.Contains(err.Error(), "/workspace/extra") {
		t.Errorf("Adopt that fails midway: %v, want an error naming /workspace/extra", err)
	}
	if st, _ := p.Status(ctx, id); st != sandbox.StatusMissing {
		t.Errorf("Status of the chat's id after a failed Adopt: %s, want missing", st)
	}
	if r, ok := listedAs(t, p, poolID); !ok || !r.Pool || r.Labels != nil {
		t.Errorf("the member after a failed Adopt: %+v (found %v), want it listed as a pool member", r, ok)
	}
	if now := agentPids(t, p, poolID); len(now) != 1 || now[0] != agents[0] {
		t.Errorf("the member's agent after a failed Adopt: %v, want still %v", now, agents)
	}

	spec := sandbox.Spec{ID: id, Limits: lim, Mounts: moveMember(t, root, mounts), Labels: map[string]string{"chatId": "chat"}}
	if err := p.Adopt(ctx, poolID, spec); err != nil {
		t.Fatal(err)
	}
	if now := agentPids(t, p, id); len(now) != 1 || now[0] != agents[0] {
		t.Errorf("the adopted sandbox's agent: %v, want the member's %v", now, agents)
	}
	if pids, _ := p.Processes(poolID); len(pids) != 0 {
		t.Errorf("processes under the pool name after Adopt: %v", cmdlines(pids))
	}
	// The command's shell is the agent's child: no bwrap of its own.
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: `tr '\0' ' ' < /proc/$PPID/cmdline; echo; df -k --output=size /workspace | tail -1`, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if !strings.Contains(lines[0], "sandbox-agent") {
		t.Errorf("the first command's parent: %q, want the agent", lines[0])
	}
	var size int64
	if _, err := fmt.Sscan(lines[len(lines)-1], &size); err != nil || size < 900_000 || size > 1_100_000 {
		t.Errorf("the workspace's size after Adopt: %d KiB (%v), want about 1 GiB", size, err)
	}
	if m, err := diskimage.IsMountPoint(filepath.Join(cfg.Root, id, "disk")); err != nil || !m {
		t.Errorf("the adopted workspace's filesystem is mounted: %v, %v", m, err)
	}

	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	for _, name := range []string{id, poolID} {
		if strings.Contains(string(mountinfo), name) {
			t.Errorf("a mount of %s is left after Delete", name)
		}
	}
}

// TestPoolAdoptOtherMounts: a member whose read-only mount is not the
// chat's (another skills directory) has its namespace ended by Adopt, and
// the chat's commands see the chat's mounts, also in the namespace the
// next command starts.
func TestPoolAdoptOtherMounts(t *testing.T) {
	cfg := bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: testenv.EngineBinary(t)}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	ctx := context.Background()
	poolID, id := sandboxtest.NewID(t), sandboxtest.NewID(t)
	for _, name := range []string{poolID, id} {
		t.Cleanup(func() { p.Delete(context.Background(), name) })
	}
	memberRoot, mounts := poolMember(t, "old.md")
	if err := p.Ensure(ctx, sandbox.Spec{ID: poolID, Pool: true, Mounts: mounts}); err != nil {
		t.Fatal(err)
	}
	if agents := agentPids(t, p, poolID); len(agents) != 1 {
		t.Fatalf("a pool member's agent after Ensure: %v, want one", agents)
	}
	chatMounts := moveMember(t, memberRoot, mounts)
	_, other := poolMember(t, "new.md")
	chatMounts[2] = other[2]
	if err := p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Mounts: chatMounts}); err != nil {
		t.Fatal(err)
	}
	if pids, _ := p.Processes(id); len(pids) != 0 {
		t.Errorf("processes after adopting a member with other mounts: %v, want its namespace ended", cmdlines(pids))
	}
	for _, when := range []string{"per command", "through the new namespace"} {
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "ls " + sandbox.SkillsDir, Timeout: 10 * time.Second})
		if err != nil || res.Stdout != "new.md\n" {
			t.Errorf("%s: ls %s: %+v, %v; want the chat's skills", when, sandbox.SkillsDir, res, err)
		}
		if when == "per command" {
			// The namespace the command started, with the chat's mounts.
			waitAgent(t, p, cfg.Root, id)
		}
	}
}

// TestPoolAdoptEgress: an adopted member's egress is served under the
// chat's id, on both paths, and no longer under the pool's.
func TestPoolAdoptEgress(t *testing.T) {
	for _, namespace := range []bool{false, true} {
		t.Run(map[bool]string{false: "per command", true: "namespace"}[namespace], func(t *testing.T) {
			env := egresstest.New(t)
			cfg := bwrap.Config{Egress: env.Proxy, ForwarderBinary: testenv.EngineBinary(t)}
			if namespace {
				cfg.AgentBinary = cfg.ForwarderBinary
			}
			p := newProviderWith(t, cfg)
			ctx := context.Background()
			poolID, id := sandboxtest.NewID(t), sandboxtest.NewID(t)
			for _, name := range []string{poolID, id} {
				t.Cleanup(func() { p.Delete(context.Background(), name) })
			}
			if err := p.Ensure(ctx, sandbox.Spec{ID: poolID, Pool: true, Egress: env.Allow}); err != nil {
				t.Fatal(err)
			}
			if err := p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Egress: env.Allow}); err != nil {
				t.Fatal(err)
			}
			if got := env.Proxy.Allowlist(poolID); got != nil {
				t.Errorf("the proxy still serves the pool name: %q", got)
			}
			url := fmt.Sprintf("http://%s:%d/", egresstest.AllowedName, env.HTTPPort)
			res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "curl -sS -m 10 " + url, Timeout: 30 * time.Second})
			if err != nil || res.Stdout != egresstest.Body {
				t.Fatalf("curl %s after Adopt: %+v, %v; want %q", url, res, err, egresstest.Body)
			}
			ev := env.WaitEvent(t, url, func(ev egress.Event) bool { return ev.Host == egresstest.AllowedName })
			if ev.SandboxID != id || ev.Decision != egress.Allowed {
				t.Errorf("event %+v, want allowed for %s", ev, id)
			}
		})
	}
}
