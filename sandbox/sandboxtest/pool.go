package sandboxtest

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// testPoolAdopt holds a provider to Adopter's contract: a pool member is
// listed as one, and once adopted it is the chat's sandbox in every way
// (its name, labels, mounts moved by the caller, restart, delete), while
// its pool name is gone.
func testPoolAdopt(t *testing.T, h Harness) {
	p := h.New(t)
	ad, ok := p.(sandbox.Adopter)
	needs(t, p, ok, "Adopter (warm pool)")
	ctx := ctxFor(t)

	// The member's writable mounts live in a directory of the pool's,
	// the skills where every sandbox finds them.
	poolRoot := filepath.Join(t.TempDir(), "pool-member")
	member := mountDirs{filepath.Join(poolRoot, "uploads"), filepath.Join(poolRoot, "intermediate"), newMountDirs(t).skills}
	for _, dir := range []string{member.uploads, member.intermediate} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	poolID, id := NewID(t), NewID(t)
	poolSpec := sandbox.Spec{ID: poolID, Pool: true, Mounts: member.mounts(), Labels: map[string]string{"pool": "default"}}
	if err := p.Ensure(ctx, poolSpec); err != nil {
		t.Fatalf("Ensure of a pool member: %v", err)
	}
	t.Cleanup(func() {
		_ = p.Delete(context.Background(), poolID)
		_ = p.Delete(context.Background(), id)
	})
	if r, ok := listed(t, p, poolID); !ok || !r.Pool {
		t.Fatalf("List after creating a pool member: %+v (found %v); want it with Pool set", r, ok)
	}

	if err := ad.Adopt(ctx, NewID(t), sandbox.Spec{ID: id}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Adopt of a member that does not exist: %v; want ErrNotFound", err)
	}

	// The caller moves the member's directories to the chat's place and
	// leaves a link behind; a file uploaded before the first command is
	// already there.
	chatRoot := filepath.Join(t.TempDir(), "chat")
	if err := os.Rename(poolRoot, chatRoot); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(chatRoot, poolRoot); err != nil {
		t.Fatal(err)
	}
	chat := mountDirs{filepath.Join(chatRoot, "uploads"), filepath.Join(chatRoot, "intermediate"), member.skills}
	writeFile(t, filepath.Join(chat.uploads, "report.csv"), "a,b\n1,2\n")
	owner := map[string]string{"appId": "app", "userId": "user", "chatId": id}
	spec := sandbox.Spec{ID: id, Mounts: chat.mounts(), Labels: owner}
	if err := ad.Adopt(ctx, poolID, spec); err != nil {
		t.Fatalf("Adopt: %v", err)
	}

	if st, err := p.Status(ctx, poolID); err != nil || st != sandbox.StatusMissing {
		t.Errorf("Status of the pool name after Adopt = %q, %v; want missing", st, err)
	}
	if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("Status of the adopted sandbox = %q, %v; want running", st, err)
	}
	r, ok := listed(t, p, id)
	if !ok || r.Pool || !maps.Equal(r.Labels, owner) {
		t.Errorf("List after Adopt: %+v (found %v); want the chat's labels %v and no Pool", r, ok, owner)
	}
	if _, ok := listed(t, p, poolID); ok {
		t.Errorf("List after Adopt still shows the pool name %s", poolID)
	}

	isolated := p.Capabilities().FilesystemIsolation
	in := func(target, name string) string {
		if !isolated {
			target = "$HOME" + strings.TrimPrefix(target, sandbox.WorkspaceDir)
		}
		return `"` + target + "/" + name + `"`
	}
	check := func(when string) {
		t.Helper()
		if res := run(t, p, id, "cat "+in(sandbox.UploadsDir, "report.csv"), 10*time.Second); res.Stdout != "a,b\n1,2\n" {
			t.Errorf("%s: the chat's upload: %+v", when, res)
		}
		out := "out-" + strings.ReplaceAll(when, " ", "-") + ".txt"
		if res := run(t, p, id, "echo made > "+in(sandbox.IntermediateDir, out), 10*time.Second); res.ExitCode != 0 {
			t.Errorf("%s: write into %s: %+v", when, sandbox.IntermediateDir, res)
		}
		wantFile(t, filepath.Join(chat.intermediate, out), "made\n", when+": a file the adopted sandbox wrote")
		if res := run(t, p, id, "ls "+in(sandbox.SkillsDir, ""), 10*time.Second); res.Stdout != "summarise.md\n" {
			t.Errorf("%s: ls %s: %+v, want the skill's file", when, sandbox.SkillsDir, res)
		}
	}
	check("adopted")
	if res := run(t, p, id, "cd /tmp && export ADOPTED=yes", 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("a command in the adopted sandbox: %+v", res)
	}
	files, err := p.Files(ctx, id)
	if err != nil {
		t.Fatalf("Files of the adopted sandbox: %v", err)
	}
	if _, err := files.ReadFile(ctx, "uploads/report.csv", 1<<20); err != nil {
		t.Errorf("Files.ReadFile of the chat's upload: %v", err)
	}

	// A second adoption onto a name that exists touches nothing.
	if err := ad.Adopt(ctx, poolID, spec); err == nil {
		t.Errorf("Adopt of a member already adopted succeeded")
	}

	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure after Stop of an adopted sandbox: %v", err)
	}
	check("after restart")
	if res := run(t, p, id, "pwd; echo $ADOPTED", 10*time.Second); res.Stdout != "/tmp\nyes\n" {
		t.Errorf("the shell's state across the restart: %q, want /tmp and yes", res.Stdout)
	}

	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, name := range []string{id, poolID} {
		if left := h.Leftovers(t, p, name); len(left) > 0 {
			t.Errorf("Delete of the adopted sandbox left behind (%s): %q", name, left)
		}
	}
	wantFile(t, filepath.Join(chat.uploads, "report.csv"), "a,b\n1,2\n", "after Delete")
}

// listed finds id in the provider's List.
func listed(t *testing.T, p sandbox.Provider, id string) (sandbox.Resource, bool) {
	t.Helper()
	list, err := p.List(ctxFor(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, r := range list {
		if r.ID == id {
			return r, true
		}
	}
	return sandbox.Resource{}, false
}
