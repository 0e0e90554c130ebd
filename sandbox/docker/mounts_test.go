package docker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

func TestDaemonPath(t *testing.T) {
	maps := []docker.PathMap{
		{Engine: "/data/files", Daemon: "/srv/flowbox/files"},
		{Engine: "/data/files/skills", Daemon: "/opt/skills"},
		{Engine: "/data", Daemon: "/srv/flowbox"},
	}
	tests := []struct{ src, want string }{
		{"/data/files", "/srv/flowbox/files"},
		{"/data/files/app/chat/uploads", "/srv/flowbox/files/app/chat/uploads"},
		{"/data/files/skills/pdf", "/opt/skills/pdf"}, // the longest match wins
		{"/data/files2/uploads", "/srv/flowbox/files2/uploads"},
		{"/data2/uploads", "/data2/uploads"}, // a prefix of the name, not of the path
		{"/elsewhere/uploads", "/elsewhere/uploads"},
	}
	for _, tc := range tests {
		if got := docker.DaemonPath(maps, tc.src); got != tc.want {
			t.Errorf("DaemonPath(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
	if got := docker.DaemonPath([]docker.PathMap{{Engine: "/", Daemon: "/host"}}, "/data/x"); got != "/host/data/x" {
		t.Errorf("DaemonPath under / = %q, want /host/data/x", got)
	}
	if got := docker.DaemonPath(nil, "/data/x"); got != "/data/x" {
		t.Errorf("DaemonPath without maps = %q, want /data/x", got)
	}
}

func TestDaemonPathsMustBeAbsolute(t *testing.T) {
	for _, m := range []docker.PathMap{{Engine: "files", Daemon: "/srv/files"}, {Engine: "/data/files", Daemon: "srv/files"}} {
		_, err := docker.New(docker.Config{WorkspaceRoot: t.TempDir(), AgentBinary: docker.NoAgent, DaemonPaths: []docker.PathMap{m}})
		if err == nil || !strings.Contains(err.Error(), "absolute") {
			t.Errorf("New with %+v: err = %v, want a refusal of the relative path", m, err)
		}
	}
}

// The daemon binds a mount from where DaemonPaths say it sees the source.
// Here the daemon sees the engine's paths, so the "daemon's" directory is
// another one with other files: the sandbox shows which was bound.
func TestMountsThroughDaemonPaths(t *testing.T) {
	t.Parallel()
	engine, daemon, other := t.TempDir(), t.TempDir(), t.TempDir()
	for dir, file := range map[string]string{
		filepath.Join(engine, "chat", "uploads"): "as-the-engine-sees-it.txt",
		filepath.Join(daemon, "chat", "uploads"): "as-the-daemon-sees-it.txt",
		other:                                    "unmapped.txt",
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := pathConfig(t, true)
	cfg.DaemonPaths = []docker.PathMap{{Engine: engine, Daemon: daemon}}
	e := newEnv(t, cfg)
	mounts := []sandbox.Mount{
		{Source: filepath.Join(engine, "chat", "uploads"), Target: sandbox.UploadsDir},
		{Source: other, Target: sandbox.SkillsDir, ReadOnly: true},
	}
	id := e.started(t, sandbox.Spec{Mounts: mounts})
	res := e.run(t, id, "ls /workspace/uploads /workspace/skills", 10*time.Second)
	want := "/workspace/skills:\nunmapped.txt\n\n/workspace/uploads:\nas-the-daemon-sees-it.txt\n"
	if res.Stdout != want {
		t.Errorf("ls in the sandbox = %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
	binds := map[string]string{}
	for _, m := range e.inspect(t, id).Mounts {
		binds[m.Destination] = m.Source
	}
	if got, want := binds[sandbox.UploadsDir], filepath.Join(daemon, "chat", "uploads"); got != want {
		t.Errorf("the container binds %s from %q, want %q", sandbox.UploadsDir, got, want)
	}
	// Files serve the mounts from where the engine sees them.
	files, err := e.p.Files(testCtx(t), id)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	if entries, err := files.List(testCtx(t), sandbox.UploadsDir); err != nil || len(entries) != 1 || entries[0].Name != "as-the-engine-sees-it.txt" {
		t.Errorf("Files.List(%s) = %+v, %v; want the engine's file", sandbox.UploadsDir, entries, err)
	}
	if err := files.WriteFile(testCtx(t), "skills/planted.md", nil); !errors.Is(err, sandbox.ErrReadOnly) {
		t.Errorf("Files.WriteFile into the read-only skills: %v, want ErrReadOnly", err)
	}

	// A map to where the daemon has nothing: the create fails, says what
	// to set, and leaves nothing behind.
	cfg.DaemonPaths = []docker.PathMap{{Engine: engine, Daemon: filepath.Join(daemon, "missing")}}
	cfg.WorkspaceRoot = e.root
	wrong := newEnv(t, cfg)
	id2 := sandboxtest.NewID(t)
	err = wrong.p.Ensure(testCtx(t), sandbox.Spec{ID: id2, Mounts: mounts[:1]})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "FLOWBOX_DOCKER_DAEMON_FILES_DIR") {
		t.Fatalf("Ensure with a source the daemon does not see: err = %v, want ErrUnavailable that names FLOWBOX_DOCKER_DAEMON_FILES_DIR", err)
	}
	if got := wrong.containersOf(t, id2); len(got) != 0 {
		t.Errorf("the failed Ensure left %d containers", len(got))
	}
	if _, err := os.Stat(filepath.Join(e.root, id2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed Ensure left its directory (stat: %v)", err)
	}
}
