package web_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// The attack run's finding 4 (T4): with a disk limit, /root and /.flowbox
// were on the engine's data disk; the chat quota bounded only the upload
// route; nothing kept the data disk from filling up.

// diskShell runs command in the session with a timeout long enough to
// write a GiB on a busy machine, and returns its output.
func diskShell(t *testing.T, c *enginetest.Client, session, command string) (stdout string, exitCode int) {
	t.Helper()
	res := execute(t, c, session, "shell:exec", map[string]any{"command": command, "timeoutSeconds": 300})
	var out struct {
		Stdout, Stderr string
		ExitCode       int
	}
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("%s: %v (%s)", command, err, res.Output)
	}
	return out.Stdout + out.Stderr, out.ExitCode
}

// newDiskSession creates a service API session for a new user and
// returns the user's client and the session's id.
func newDiskSession(t *testing.T, env *enginetest.Env, user string) (*enginetest.Client, string) {
	t.Helper()
	c := env.Bearer(env.APIKey(t, env.CreateUser(t, user, auth.RoleUser)))
	var s sessionView
	expect(t, c, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &s)
	return c, s.ID
}

// hostBytes sums the regular files under dir that are on dir's own
// filesystem: not in a mounted image, and not the images themselves. What
// a sandbox writes there is on the engine's data disk.
func hostBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed meanwhile
		}
		if d.IsDir() && p != dir {
			if m, _ := diskimage.IsMountPoint(p); m {
				return filepath.SkipDir
			}
		}
		if d.Type().IsRegular() && !strings.HasSuffix(p, ".img") {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// TestAttackDiskHomeAndStateEscapeTheLimit: a command fills the
// workspace to its 1 GiB limit, then writes into /root and /.flowbox,
// which were host directories: the writes now fail with ENOSPC and
// nothing lands on the data disk, while the workspace still fills to
// its size and the shell keeps its state afterwards.
func TestAttackDiskHomeAndStateEscapeTheLimit(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_SANDBOX_DISK_GIB": "1"}})
	c, s := newDiskSession(t, env, "disk-mallory")
	before := hostBytes(t, env.Config.DataDir)

	// One command: with the disk full, the shell's own state could not
	// be saved after it.
	out, _ := diskShell(t, c, s, `dd if=/dev/zero of=/workspace/fill bs=1M count=1200 2>/dev/null; echo fill=$(du -m /workspace/fill | cut -f1)
dd if=/dev/zero of=/root/escape bs=1M count=50 2>&1 | grep -o 'No space left on device' | head -1; echo home=${PIPESTATUS[0]}
dd if=/dev/zero of=/.flowbox/escape bs=1M count=50 2>&1 | grep -o 'No space left on device' | head -1; echo state=${PIPESTATUS[0]}
rm -f /workspace/fill`)
	var fill int
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "fill="); ok {
			fill = atoi(v)
		}
	}
	if fill < 900 {
		t.Errorf("the workspace filled to %d MiB of its 1 GiB limit, want at least 900 (output %q)", fill, out)
	}
	for _, want := range []string{"home=1", "state=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("a write past the disk limit into /root or /.flowbox: output %q, want %q (dd failing)", out, want)
		}
	}
	if strings.Count(out, "No space left on device") < 2 {
		t.Errorf("the writes into /root and /.flowbox: output %q, want No space left on device for both", out)
	}
	if grown := hostBytes(t, env.Config.DataDir) - before; grown > 4<<20 {
		t.Errorf("the engine's data directory grew by %d bytes outside the sandbox's image, want almost nothing", grown)
	}

	// The legitimate use next to it: the shell and its state work.
	if out, code := diskShell(t, c, s, "rm -f /root/escape /.flowbox/escape; cd /workspace && export KEPT=yes && echo x > /root/.note"); code != 0 {
		t.Fatalf("a command after the disk was full: %d %q", code, out)
	}
	if out, _ := diskShell(t, c, s, "echo $KEPT $(pwd) $(cat /root/.note)"); strings.TrimSpace(out) != "yes /workspace x" {
		t.Errorf("the shell's state after the disk was full: %q, want %q", out, "yes /workspace x")
	}
}

// TestAttackQuotaShellWritesPastChatQuota: the sandbox's own writes into
// uploads and intermediate, which no route sees, stop at the chat quota
// (10 MiB): the 60 MiB dd of the attack run fails with ENOSPC. An upload
// under the quota still works afterwards. On the chat's disk image, and
// where the engine keeps checkpoints, on the quota of the chat's files in
// the checkpoint pool (EDQUOT), which their checkpoints count against.
func TestAttackQuotaShellWritesPastChatQuota(t *testing.T) {
	t.Parallel()
	t.Run("chat disk", func(t *testing.T) {
		t.Parallel()
		testShellWritesPastChatQuota(t, map[string]string{})
	})
	t.Run("checkpoint pool", func(t *testing.T) {
		t.Parallel()
		testShellWritesPastChatQuota(t, map[string]string{"FLOWBOX_CHECKPOINTS": "on", "FLOWBOX_CHECKPOINT_POOL": checkpointtest.Pool(t)})
	})
}

func testShellWritesPastChatQuota(t *testing.T, cfg map[string]string) {
	cfg["FLOWBOX_UPLOAD_MAX_CHAT_MIB"] = "10"
	env := enginetest.Start(t, enginetest.Options{Env: cfg})
	c, s := newDiskSession(t, env, "quota-mallory")
	out, _ := diskShell(t, c, s, `dd if=/dev/zero of=/workspace/uploads/big bs=1M count=60 2>&1 | grep -o 'No space left on device' | head -1; echo uploads=${PIPESTATUS[0]}
dd if=/dev/zero of=/workspace/intermediate/big bs=1M count=60 2>&1 | grep -o 'No space left on device' | head -1; echo intermediate=${PIPESTATUS[0]}
echo total=$(cat /workspace/uploads/big /workspace/intermediate/big | wc -c)`)
	for _, want := range []string{"uploads=1", "intermediate=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("60 MiB written into the chat's files under a 10 MiB quota: output %q, want %q (dd failing)", out, want)
		}
	}
	var total int
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "total="); ok {
			total = atoi(v)
		}
	}
	// The chat's disk holds the quota and room for ext4's own structures
	// (an eighth and 4 MiB: workspace.Store's diskSize), never 60 MiB.
	if total > 10<<20+10<<20/8+4<<20 {
		t.Errorf("the chat's files took %d bytes, over its 10 MiB quota and the disk's room", total)
	}
	// Past the quota, the routes refuse more.
	wantError(t, c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s+"/files?path=/workspace/uploads/more.bin", bytes.Repeat([]byte("m"), 1<<20)), http.StatusRequestEntityTooLarge, "too_large")
	if n := hostBytes(t, filepath.Join(env.Config.Files.Dir, "chats")); n > 1<<20 {
		t.Errorf("%d bytes of the chat's files are on the engine's data disk, outside the chat's image", n)
	}

	// Legitimate: room made, an upload under the quota is stored and the
	// sandbox sees it (once written out, the deleted files' blocks are
	// the quota's again).
	diskShell(t, c, s, "rm -f /workspace/uploads/big /workspace/intermediate/big; sync")
	if r := c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s+"/files?path=/workspace/uploads/ok.bin", bytes.Repeat([]byte("k"), 2<<20)); r.Status != http.StatusCreated {
		t.Fatalf("an upload of 2 MiB under a 10 MiB quota: %d %s", r.Status, r.Body)
	}
	if out, _ := diskShell(t, c, s, "wc -c < /workspace/uploads/ok.bin"); strings.TrimSpace(out) != "2097152" {
		t.Errorf("the sandbox sees the upload as %q bytes, want 2097152", out)
	}
}

// TestAttackQuotaFileDoorsPastChatQuota: the service API's PUT (3 × 8 MiB
// in the attack run) and the file API's write are held to the chat
// quota as the upload route is: refused with 413 and a message saying
// what to do. Writes under the quota, and outside uploads and
// intermediate, still work.
func TestAttackQuotaFileDoorsPastChatQuota(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_UPLOAD_MAX_CHAT_MIB": "10"}})
	c, s := newDiskSession(t, env, "put-mallory")
	put := func(path string, n int) enginetest.Response {
		return c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s+"/files?path="+path, bytes.Repeat([]byte("p"), n))
	}
	if r := put("/workspace/uploads/a1", 8<<20); r.Status != http.StatusCreated {
		t.Fatalf("the first 8 MiB under a 10 MiB quota: %d %s", r.Status, r.Body)
	}
	for _, p := range []string{"/workspace/uploads/a2", "/workspace/intermediate/a3", "uploads/a4"} {
		e := wantError(t, put(p, 8<<20), http.StatusRequestEntityTooLarge, "too_large")
		if !strings.Contains(e.Message, "not enough space in this chat") {
			t.Errorf("PUT %s past the quota: message %q, want it to say the chat has no room", p, e.Message)
		}
	}
	// Outside the chat's files: the sandbox's disk, not the chat quota.
	if r := put("/workspace/free.bin", 8<<20); r.Status != http.StatusCreated {
		t.Errorf("a PUT into the workspace outside uploads: %d %s", r.Status, r.Body)
	}

	// The file API, on a chat of an app, filled by the upload route.
	env.CreateUser(t, "files-alice", auth.RoleUser)
	alice := env.Login(t, "files-alice", enginetest.Password("files-alice"))
	app := newApp(t, alice, "quota")
	if r := upload(t, alice, "/api/uploads/c-quota?appId="+app, part{"fill.bin", bytes.Repeat([]byte("u"), 9<<20+600<<10)}); r.Status != 201 {
		t.Fatalf("an upload under the quota: %d %s", r.Status, r.Body)
	}
	write := func(path string, n int) enginetest.Response {
		return alice.Do(t, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "write", "appId": app, "chatId": "c-quota", "path": path, "content": strings.Repeat("w", n)})
	}
	r := write("/workspace/uploads/w.txt", 1000<<10)
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "not enough space in this chat") {
		t.Errorf("a file API write past the quota: %d %s, want 413 saying the chat has no room", r.Status, r.Body)
	}
	if r := write("/workspace/uploads/small.txt", 10<<10); r.Status != 200 {
		t.Errorf("a file API write under the quota: %d %s", r.Status, r.Body)
	}
	if r := write("/workspace/notes.txt", 1000<<10); r.Status != 200 {
		t.Errorf("a file API write outside uploads and intermediate: %d %s", r.Status, r.Body)
	}
}

// TestAttackDiskDataDiskFull: on a data directory that is a 64 MiB tmpfs
// of the test's own, with 24 MiB kept free, filling the disk from the
// host makes the engine refuse uploads, file writes and new sandboxes
// with 507 and a clear message, and /readyz report the disk; once room
// is made, everything works again. The engine never fills the disk
// itself: the real disk is never touched.
func TestAttackDiskDataDiskFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs as the data directory needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64m,mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs for the data directory: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	data := filepath.Join(dir, "data")
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_DATA_DIR":            data,
		"FLOWBOX_DATA_DISK_MIN_FREE":  "24MiB",
		"FLOWBOX_FILES_CHAT_DISK":     "off",
		"FLOWBOX_UPLOAD_MAX_CHAT_MIB": "16",
	}})
	c, s := newDiskSession(t, env, "full-mallory")
	anon := env.Anonymous()
	if r := anon.Do(t, "GET", "/readyz", nil); r.Status != 200 {
		t.Fatalf("/readyz with room on the disk: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s+"/files?path=/workspace/uploads/a.txt", []byte("before")); r.Status != http.StatusCreated {
		t.Fatalf("a PUT with room on the disk: %d %s", r.Status, r.Body)
	}

	// Fill the disk to 16 MiB free: below the 24 MiB kept.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	r := anon.Do(t, "GET", "/readyz", nil)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"dataDisk":"the server's data disk is almost full`) {
		t.Errorf("/readyz on a low disk: %d %s, want 503 naming dataDisk", r.Status, r.Body)
	}
	e := wantError(t, c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s+"/files?path=/workspace/uploads/b.txt", []byte("after")), 507, "insufficient_storage")
	if !strings.Contains(e.Message, "almost full") || !strings.Contains(e.Message, "try again later") {
		t.Errorf("a PUT on a low disk: message %q, want it to say the disk is almost full and what to do", e.Message)
	}
	b, s2 := newDiskSession(t, env, "full-bob")
	e = wantError(t, b.Do(t, "POST", "/api/sandbox/v1/sessions/"+s2+"/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "echo hi"}}), 507, "insufficient_storage")
	if !strings.Contains(e.Message, "almost full") {
		t.Errorf("a new sandbox on a low disk: message %q, want it to say the disk is almost full", e.Message)
	}
	env.CreateUser(t, "full-alice", auth.RoleUser)
	alice := env.Login(t, "full-alice", enginetest.Password("full-alice"))
	app := newApp(t, alice, "full")
	if r := upload(t, alice, "/api/uploads/c-full?appId="+app, part{"x.txt", []byte("x")}); r.Status != 507 || !strings.Contains(string(r.Body), "almost full") {
		t.Errorf("an upload on a low disk: %d %s, want 507", r.Status, r.Body)
	}

	// Room made: writes work again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := anon.Do(t, "GET", "/readyz", nil); r.Status != 200 {
		t.Errorf("/readyz after room was made: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s+"/files?path=/workspace/uploads/b.txt", []byte("after")); r.Status != http.StatusCreated {
		t.Errorf("a PUT after room was made: %d %s", r.Status, r.Body)
	}
	if r := upload(t, alice, "/api/uploads/c-full?appId="+app, part{"x.txt", []byte("x")}); r.Status != 201 {
		t.Errorf("an upload after room was made: %d %s", r.Status, r.Body)
	}
}

// atoi reads a number a command printed; 0 when it is none.
func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}
