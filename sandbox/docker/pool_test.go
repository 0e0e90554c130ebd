package docker_test

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

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// member starts a warm pool member of spec's shape and returns its pool
// id.
func (e env) member(t *testing.T, spec sandbox.Spec) string {
	t.Helper()
	spec.Pool = true
	spec.Labels = map[string]string{"pool": "test"}
	return e.started(t, spec)
}

// listed returns what List says of id.
func (e env) listed(t *testing.T, id string) (sandbox.Resource, bool) {
	t.Helper()
	list, err := e.p.List(testCtx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(list, func(r sandbox.Resource) bool { return r.ID == id })
	if i < 0 {
		return sandbox.Resource{}, false
	}
	return list[i], true
}

// wantMember fails unless poolID is still an untouched, running member:
// listed with Pool, its container and directory under its name, and
// nothing under id's.
func (e env) wantMember(t *testing.T, poolID, id string) {
	t.Helper()
	if r, ok := e.listed(t, poolID); !ok || !r.Pool {
		t.Errorf("List of the member: %+v (found %v); want it with Pool", r, ok)
	}
	if _, ok := e.listed(t, id); ok {
		t.Errorf("List shows %s, which the member did not become", id)
	}
	if st, err := e.p.Status(testCtx(t), poolID); err != nil || st != sandbox.StatusRunning {
		t.Errorf("Status of the member = %q, %v; want running", st, err)
	}
	if st, err := e.p.Status(testCtx(t), id); err != nil || st != sandbox.StatusMissing {
		t.Errorf("Status of %s = %q, %v; want missing", id, st, err)
	}
	if fi, err := os.Lstat(filepath.Join(e.root, poolID)); err != nil || !fi.IsDir() {
		t.Errorf("the member's directory: %v, %v; want a directory", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(e.root, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory of %s: %v; want none", id, err)
	}
	if res := e.run(t, poolID, "echo alive", 10*time.Second); res.Stdout != "alive\n" {
		t.Errorf("a command in the member: %+v", res)
	}
}

// wantGone fails unless nothing of the names is left: containers,
// directories, links.
func (e env) wantGone(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := os.Lstat(filepath.Join(e.root, id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the directory of %s after Delete: %v; want none", id, err)
		}
		if cs := e.containersOf(t, id); len(cs) > 0 {
			t.Errorf("containers of %s after Delete: %v", id, cs[0].Names)
		}
	}
}

// Adopt refuses, touching nothing, a member it cannot give to the spec:
// none or no member by that id, a stopped one, one of another shape, and
// a spec whose sandbox exists.
func TestAdoptRefuses(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, cfg docker.Config) {
		e := newEnv(t, cfg)
		ctx := testCtx(t)
		poolID := e.member(t, sandbox.Spec{})
		id := sandboxtest.NewID(t)

		plain := e.started(t, sandbox.Spec{})
		stopped := e.member(t, sandbox.Spec{})
		if err := e.p.Stop(ctx, stopped); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			poolID string
		}{{"not a member", plain}, {"stopped member", stopped}, {"missing", sandboxtest.NewID(t)}} {
			if err := e.p.Adopt(ctx, tc.poolID, sandbox.Spec{ID: id}); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("Adopt of a %s: %v; want ErrNotFound", tc.name, err)
			}
		}
		if r, ok := e.listed(t, plain); !ok || r.Pool {
			t.Errorf("List of the sandbox that is no member: %+v (found %v)", r, ok)
		}

		for _, tc := range []struct {
			name string
			spec sandbox.Spec
			says string
		}{
			{"network", sandbox.Spec{ID: id, Network: true}, "network"},
			{"memory", sandbox.Spec{ID: id, Limits: sandbox.Limits{MemoryMiB: 100}}, "memory"},
			{"pids", sandbox.Spec{ID: id, Limits: sandbox.Limits{Pids: 99}}, "pids"},
			{"mounts", sandbox.Spec{ID: id, Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: sandbox.UploadsDir}}}, sandbox.UploadsDir},
		} {
			err := e.p.Adopt(ctx, poolID, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.says) || errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("Adopt with another %s: %v; want an error naming %q", tc.name, err, tc.says)
			}
		}
		// An engine that runs another image shares the workspace root.
		ocfg := cfg
		ocfg.WorkspaceRoot, ocfg.Image, ocfg.Shell = e.root, docker.DefaultImage, docker.DefaultShell
		if err := dockertest.Provider(t, ocfg).Adopt(ctx, poolID, sandbox.Spec{ID: id}); err == nil || !strings.Contains(err.Error(), "image") {
			t.Errorf("Adopt by a provider of another image: %v; want an error naming the image", err)
		}
		e.wantMember(t, poolID, id)

		// The spec's sandbox exists, as a container or as a directory.
		if err := e.p.Adopt(ctx, poolID, sandbox.Spec{ID: plain}); err == nil {
			t.Errorf("Adopt onto the existing sandbox %s succeeded", plain)
		}
		if r, ok := e.listed(t, plain); !ok || r.Pool {
			t.Errorf("List of the existing sandbox after a refused Adopt: %+v (found %v)", r, ok)
		}
		if err := os.MkdirAll(filepath.Join(e.root, id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Adopt(ctx, poolID, sandbox.Spec{ID: id}); err == nil {
			t.Errorf("Adopt onto an existing directory succeeded")
		}
		if err := os.Remove(filepath.Join(e.root, id)); err != nil {
			t.Fatal(err)
		}
		e.wantMember(t, poolID, id)
	})
}

// Once adopted, the pool id names nothing: no command, no files, no new
// sandbox through the link its directory left, and its Delete leaves the
// adopted sandbox whole, restart included. The adopted sandbox's Delete
// removes both names.
func TestAdoptedPoolIDNamesNothing(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, cfg docker.Config) {
		e := newEnv(t, cfg)
		ctx := testCtx(t)
		poolID := e.member(t, sandbox.Spec{})
		id := sandboxtest.NewID(t)
		owner := map[string]string{"chatId": "c1", "managed": "false"}
		if err := e.p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Labels: owner}); err != nil {
			t.Fatalf("Adopt: %v", err)
		}
		if r, ok := e.listed(t, id); !ok || r.Pool || fmt.Sprint(r.Labels) != "map[chatId:c1]" {
			t.Errorf("List of the adopted sandbox: %+v (found %v); want labels chatId alone (managed is the product's), no Pool", r, ok)
		}
		e.run(t, id, "echo kept > /workspace/note", 10*time.Second)

		if _, err := e.p.Exec(ctx, poolID, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second}); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Exec in the pool id: %v; want ErrNotFound", err)
		}
		if _, err := e.p.Files(ctx, poolID); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Files of the pool id: %v; want ErrNotFound", err)
		}
		if err := e.p.Ensure(ctx, sandbox.Spec{ID: poolID}); err == nil {
			t.Errorf("Ensure of the pool id succeeded")
		}
		if st, err := e.p.Status(ctx, poolID); err != nil || st != sandbox.StatusMissing {
			t.Errorf("Status of the pool id after Ensure = %q, %v; want missing", st, err)
		}
		if err := e.p.Delete(ctx, poolID); err != nil {
			t.Errorf("Delete of the pool id: %v", err)
		}

		if err := e.p.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
			t.Fatalf("Ensure after Stop: %v", err)
		}
		if res := e.run(t, id, "cat /workspace/note", 10*time.Second); res.Stdout != "kept\n" {
			t.Errorf("the workspace after a restart: %+v", res)
		}
		if err := e.p.Delete(ctx, id); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		e.wantGone(t, id, poolID)
		if _, ok := e.listed(t, id); ok {
			t.Errorf("List still shows %s after Delete", id)
		}
	})
}

// The egress proxy serves an adopted member under the chat's id, across
// a restart; when a step fails after the container was renamed (here the
// spec's allowlist), Adopt undoes every step and the member serves on as
// it was.
func TestAdoptEgress(t *testing.T) {
	t.Parallel()
	penv := egresstest.New(t)
	cfg := pathConfig(t, true)
	cfg.Egress = penv.Proxy
	e := newEnv(t, cfg)
	ctx := testCtx(t)
	get := fmt.Sprintf(`printf 'GET http://%[1]s:%[2]d/ HTTP/1.1\r\nHost: %[1]s:%[2]d\r\nConnection: close\r\n\r\n' | nc -w 10 127.0.0.1 3128`, egresstest.AllowedName, penv.HTTPPort)
	reaches := func(t *testing.T, id string) {
		t.Helper()
		if res := e.run(t, id, get, 30*time.Second); !strings.HasSuffix(res.Stdout, egresstest.Body) {
			t.Fatalf("GET from %s: %q (stderr %q), want %q", id, res.Stdout, res.Stderr, egresstest.Body)
		}
		penv.WaitEvent(t, "GET from "+id, func(ev egress.Event) bool { return ev.SandboxID == id && ev.Decision == egress.Allowed })
	}
	poolID := e.member(t, sandbox.Spec{Egress: penv.Allow})
	id := sandboxtest.NewID(t)

	err := e.p.Adopt(ctx, poolID, sandbox.Spec{ID: id, Egress: []string{"*"}})
	if err == nil || !strings.Contains(err.Error(), `"*"`) {
		t.Fatalf("Adopt with an allowlist the proxy refuses: %v; want an error naming it", err)
	}
	e.wantMember(t, poolID, id)
	if got := penv.Proxy.Allowlist(poolID); fmt.Sprint(got) != fmt.Sprint(penv.Allow) {
		t.Errorf("the member's allowlist after the rollback: %q, want %q", got, penv.Allow)
	}
	reaches(t, poolID)

	spec := sandbox.Spec{ID: id, Egress: penv.Allow}
	if err := e.p.Adopt(ctx, poolID, spec); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if got := penv.Proxy.Allowlist(poolID); got != nil {
		t.Errorf("the proxy still serves the pool id: %q", got)
	}
	reaches(t, id)
	if err := e.p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := penv.Proxy.Allowlist(id); got != nil {
		t.Errorf("the proxy still serves the stopped sandbox: %q", got)
	}
	if err := e.p.Ensure(ctx, spec); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	reaches(t, id)
	if err := e.p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := penv.Proxy.Allowlist(id); got != nil {
		t.Errorf("the proxy still serves the deleted sandbox: %q", got)
	}
	e.wantGone(t, id, poolID)
}

// A member with a disk limit keeps its workspace's filesystem through
// the adoption and a restart, and Delete unmounts it.
func TestAdoptDiskLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pathConfig(t, true))
	ctx := testCtx(t)
	shape := sandbox.Spec{Limits: sandbox.Limits{DiskGiB: 1}}
	poolID := e.member(t, shape)
	id := sandboxtest.NewID(t)
	t.Cleanup(func() { e.p.Delete(context.Background(), id) })
	spec := shape
	spec.ID = id
	if err := e.p.Adopt(ctx, poolID, spec); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	mounts := func() []string {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, id) || strings.Contains(l, poolID) {
				out = append(out, l)
			}
		}
		return out
	}
	if m := mounts(); len(m) != 1 || !strings.Contains(m[0], filepath.Join(e.root, id, "workspace")) {
		t.Errorf("the workspace's mount after Adopt: %q; want one, at the sandbox's directory", m)
	}
	if res := e.run(t, id, "df -k /workspace | tail -1; echo kept > /workspace/note", 30*time.Second); !strings.Contains(res.Stdout, "/workspace") {
		t.Errorf("df in the adopted sandbox: %+v", res)
	}
	if err := e.p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Ensure(ctx, spec); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	if res := e.run(t, id, "cat /workspace/note", 30*time.Second); res.Stdout != "kept\n" {
		t.Errorf("after a restart: %+v", res)
	}
	if err := e.p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if m := mounts(); len(m) > 0 {
		t.Errorf("mounts left after Delete: %q", m)
	}
	e.wantGone(t, id, poolID)
}
