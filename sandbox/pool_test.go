package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// poolEnv is one engine's view of a warm pool: bwrap sandboxes with the
// command agent, the chats' workspace directories and the skills, the
// shared database. Several managers over one poolEnv are several engine
// processes.
type poolEnv struct {
	*env
	ws     *workspace.Store
	skills string
}

func newPoolEnv(t *testing.T) *poolEnv {
	t.Helper()
	e := newEnv(t)
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: testenv.EngineBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.provider = p
	ws, err := workspace.New(workspace.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	skills := t.TempDir()
	if err := os.WriteFile(filepath.Join(skills, "SKILL.md"), []byte("skill\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &poolEnv{env: e, ws: ws, skills: skills}
}

func (e *poolEnv) manager(t *testing.T, size int, mod func(*sandbox.Config)) *sandbox.Manager {
	t.Helper()
	skills := sandbox.Mount{Source: e.skills, Target: sandbox.SkillsDir, ReadOnly: true}
	cfg := sandbox.Config{
		Provider: e.provider, Store: e.store,
		Limits: sandbox.Limits{MemoryMiB: 256, Pids: 128},
		MountsFor: func(ctx context.Context, scope sandbox.Scope) ([]sandbox.Mount, error) {
			m, err := e.ws.Mounts(ctx, scope)
			return append(m, skills), err
		},
		Pool: sandbox.PoolConfig{Size: size, Store: e.store, Workspace: e.ws, SharedMounts: []sandbox.Mount{skills}},
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := m.DrainPool(context.Background()); err != nil {
			t.Errorf("DrainPool: %v", err)
		}
	})
	return m
}

func poolStats(t *testing.T, m *sandbox.Manager) sandbox.PoolStats {
	t.Helper()
	s, ok, err := m.PoolStats(ctx(t))
	if err != nil || !ok {
		t.Fatalf("PoolStats: %+v, %v, %v", s, ok, err)
	}
	return s
}

// poolSettles waits until the pool's figures satisfy ok: an adopted
// member's document goes beside the first command.
func poolSettles(t *testing.T, m *sandbox.Manager, what string, ok func(sandbox.PoolStats) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := poolStats(t, m)
		if ok(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool: %+v; want %s", s, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func refill(t *testing.T, m *sandbox.Manager, want int) {
	t.Helper()
	n, err := m.RefillPool(ctx(t))
	if err != nil || n != want {
		t.Fatalf("RefillPool = %d, %v; want %d created", n, err, want)
	}
}

// TestPoolAdoption: a new chat's first command runs in a pool member
// that becomes the chat's sandbox in every way a user sees: its files
// uploaded before the command, its intermediate files, the skills, its
// startup commands, its record and labels; the member is gone from the
// pool, and the refill puts another in.
func TestPoolAdoption(t *testing.T) {
	e := newPoolEnv(t)
	app := appCommands{startup: []string{"echo started > /tmp/startup"}}
	// A refill, asked for after an adoption, says whether the command
	// that caused the adoption had run: a member's creation beside it
	// would take the machine from it.
	var ran atomic.Bool
	refills := make(chan bool, 4)
	m := e.manager(t, 2, func(c *sandbox.Config) {
		c.Lifecycle = app
		c.Pool.Refill = func() { refills <- ran.Load() }
	})
	refill(t, m, 2)
	refill(t, m, 0)
	if s := poolStats(t, m); s.Ready != 2 || s.Creating != 0 || s.Refills != 2 || !strings.Contains(s.Shape, "256 MiB") {
		t.Fatalf("pool after refill: %+v; want 2 ready of a shape with 256 MiB", s)
	}
	members, err := e.store.Members(ctx(t), "bwrap")
	if err != nil || len(members) != 2 {
		t.Fatalf("Members = %v, %v", members, err)
	}

	scope := newScope(t)
	id := scope.SandboxID()
	t.Cleanup(func() { _ = m.Delete(context.Background(), id) })
	if _, err := e.ws.Save(ctx(t), scope, "", "early.csv", strings.NewReader("a,b\n")); err != nil {
		t.Fatal(err)
	}
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "cat /tmp/startup uploads/early.csv /workspace/skills/SKILL.md && echo out > intermediate/out.txt && pwd", Timeout: 10 * time.Second,
		OnOutput: func(sandbox.Stream, []byte) { ran.Store(true) }})
	if err != nil || res.ExitCode != 0 || res.Stdout != "started\na,b\nskill\n/workspace\n" {
		t.Fatalf("first command: %+v, %v", res, err)
	}
	select {
	case afterCommand := <-refills:
		if !afterCommand {
			t.Errorf("the refill was asked for before the first command had run")
		}
	case <-time.After(30 * time.Second):
		t.Errorf("no refill was asked for after the adoption")
	}
	poolSettles(t, m, "1 claim, 1 ready after the first command", func(s sandbox.PoolStats) bool { return s.Claims == 1 && s.Ready == 1 })
	// The chat's sandbox is one of the two members, under the chat's name.
	adopted := ""
	for _, mem := range members {
		if st, _ := e.provider.Status(ctx(t), mem.PoolID); st == sandbox.StatusMissing {
			adopted = mem.PoolID
		}
	}
	if adopted == "" {
		t.Fatalf("both members are still there: the chat's sandbox was created, not adopted")
	}
	list, err := e.provider.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range list {
		if r.ID == id {
			found = true
			want := map[string]string{"appId": scope.AppID, "userId": scope.UserID, "chatId": scope.ChatID}
			if r.Pool || !maps.Equal(r.Labels, want) {
				t.Errorf("the adopted sandbox is listed as %+v; want the chat's labels %v", r, want)
			}
		}
	}
	if !found {
		t.Errorf("List does not show the chat's sandbox %s", id)
	}
	inst, err := m.Lookup(ctx(t), scope)
	if err != nil || inst.Status != sandbox.StatusRunning || inst.Limit.MemoryMiB != 256 {
		t.Errorf("the chat's record: %+v, %v", inst, err)
	}
	entries, err := e.ws.List(ctx(t), scope, workspace.Intermediate, "")
	if err != nil || len(entries) != 1 || entries[0].Name != "out.txt" {
		t.Errorf("the chat's intermediate files on the host: %+v, %v", entries, err)
	}
	// An upload after the first command reaches the running sandbox.
	if _, err := e.ws.Save(ctx(t), scope, "", "late.txt", strings.NewReader("late\n")); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "cat uploads/late.txt", Timeout: 10 * time.Second}); err != nil || res.Stdout != "late\n" {
		t.Errorf("an upload after the first command: %+v, %v", res, err)
	}
	// Stop and start keep it the chat's, mounts included.
	if err := m.Stop(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "cat uploads/late.txt intermediate/out.txt", Timeout: 10 * time.Second}); err != nil || res.Stdout != "late\nout\n" {
		t.Errorf("after a stop and start: %+v, %v", res, err)
	}
	if s := poolStats(t, m); s.Claims != 1 {
		t.Errorf("a second command claimed a member: %+v", s)
	}
	refill(t, m, 1)
}

// TestPoolExclusiveClaims: engine processes adopting at once never take
// the same member; the chats past the pool's size get sandboxes of their
// own.
func TestPoolExclusiveClaims(t *testing.T) {
	e := newPoolEnv(t)
	const size, chats = 3, 6
	engines := []*sandbox.Manager{e.manager(t, size, nil), e.manager(t, size, nil)}
	refill(t, engines[0], size)
	var wg sync.WaitGroup
	outs := make([]string, chats)
	errs := make([]error, chats)
	scopes := make([]sandbox.Scope, chats)
	for i := range chats {
		scopes[i] = sandbox.Scope{AppID: "app-exclusive", UserID: "u", ChatID: fmt.Sprintf("%s-%d-%d", t.Name(), i, time.Now().UnixNano())}
		m := engines[i%2]
		t.Cleanup(func() { _ = m.Delete(context.Background(), scopes[i].SandboxID()) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Exec(ctx(t), scopes[i], sandbox.ExecRequest{Command: "echo " + fmt.Sprint(i) + " > /tmp/mine; sleep 0.2; cat /tmp/mine", Timeout: 20 * time.Second})
			outs[i], errs[i] = res.Stdout, err
		}()
	}
	wg.Wait()
	for i := range chats {
		if errs[i] != nil || outs[i] != fmt.Sprint(i)+"\n" {
			t.Errorf("chat %d: %q, %v; want its own sandbox", i, outs[i], errs[i])
		}
	}
	claims, empty := uint64(0), uint64(0)
	for _, m := range engines {
		s := poolStats(t, m)
		claims += s.Claims
		empty += s.Misses[sandbox.PoolMissEmpty]
	}
	if claims != size || empty != chats-size {
		t.Errorf("claims %d, misses for an empty pool %d; want %d and %d", claims, empty, size, chats-size)
	}
	poolSettles(t, engines[0], "no member left after every one was adopted", func(s sandbox.PoolStats) bool { return s.Ready+s.Creating == 0 })
}

// TestPoolAdoptedStaysClaimed: the member a chat adopted leaves the
// pool's documents while the chat's first command still runs, however
// long it runs, and its claim stays once its document is gone, so that
// an engine that listed the pool before cannot claim it again: it gets
// the next member.
func TestPoolAdoptedStaysClaimed(t *testing.T) {
	e := newPoolEnv(t)
	m := e.manager(t, 2, nil)
	refill(t, m, 2)
	before, err := e.store.Members(ctx(t), "bwrap")
	if err != nil || len(before) != 2 {
		t.Fatalf("Members = %v, %v", before, err)
	}
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	// The first command is a program kept running (standard input), as
	// a server the agent starts would be: it ends when stdin closes.
	stdin, feed := io.Pipe()
	done := make(chan error, 1)
	go func() {
		res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "cat", Stdin: stdin})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("first command: %+v", res)
		}
		done <- err
	}()
	// The document goes while the program runs.
	var left []sandbox.PoolMember
	deadline := time.Now().Add(30 * time.Second)
	for {
		if left, err = e.store.Members(ctx(t), "bwrap"); err != nil {
			t.Fatal(err)
		}
		if len(left) == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the first command ended (%v) with the adopted member's document still there: %v", err, left)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adopted member's document is still there while the first command runs: %v", left)
		}
	}
	feed.Close()
	adopted := before[0].PoolID
	if adopted == left[0].PoolID {
		adopted = before[1].PoolID
	}
	// Another engine with the listing from before: the adopted member's
	// claim is refused.
	if got, err := e.store.Claim(ctx(t), "bwrap", []string{adopted}, "another-engine", sandbox.PoolClaimAdopt, time.Now()); err != nil || len(got) != 0 {
		t.Errorf("claim of the adopted member by another engine = %v, %v; want refused", got, err)
	}
	// The next chat adopts the other member.
	next := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), next.SandboxID()) })
	if res, err := m.Exec(ctx(t), next, sandbox.ExecRequest{Command: "echo hi", Timeout: 10 * time.Second}); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("next chat: %+v, %v", res, err)
	}
	if s := poolStats(t, m); s.Claims != 2 || s.Misses[sandbox.PoolMissFailed] != 0 {
		t.Errorf("pool after two chats: %+v; want 2 claims and no failed adoption", s)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestPoolShapeMiss: a chat whose app narrows the limits gets a sandbox
// created for it, with its limits, and the pool keeps its member.
// TestPoolDeletedChat: the first command of a chat deleted meanwhile
// creates nothing, record or sandbox, and leaves the pool's member ready
// for the next chat.
func TestPoolDeletedChat(t *testing.T) {
	e := newPoolEnv(t)
	m := e.manager(t, 1, nil)
	refill(t, m, 1)
	gone := sandbox.Scope{AppID: "app1", UserID: "u1", ChatID: "deleted"}
	if err := e.store.RequestDeletions(ctx(t), []mongostore.Deletion{mongostore.ChatDeletion(gone, "task", time.Now())}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx(t), gone, sandbox.ExecRequest{Command: "echo hi"}); !errors.Is(err, sandbox.ErrDeleted) {
		t.Fatalf("a deleted chat's first command: %v; want ErrDeleted", err)
	}
	if _, err := e.store.Get(ctx(t), e.provider.Name(), gone.SandboxID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the deleted chat's record: %v; want none", err)
	}
	if st, err := e.provider.Status(ctx(t), gone.SandboxID()); err != nil || st != sandbox.StatusMissing {
		t.Errorf("the deleted chat's sandbox: %s, %v; want missing", st, err)
	}
	if s := poolStats(t, m); s.Ready != 1 || s.Claims != 0 {
		t.Errorf("pool after the refused command: %+v; want its member ready, unclaimed", s)
	}
	next := sandbox.Scope{AppID: "app1", UserID: "u1", ChatID: "next"}
	t.Cleanup(func() { _ = m.Delete(context.Background(), next.SandboxID()) })
	if res, err := m.Exec(ctx(t), next, sandbox.ExecRequest{Command: "echo hi"}); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("the next chat's first command: %+v, %v", res, err)
	}
	if s := poolStats(t, m); s.Claims != 1 {
		t.Errorf("pool after the next chat: %+v; want its member adopted", s)
	}
}

func TestPoolShapeMiss(t *testing.T) {
	e := newPoolEnv(t)
	m := e.manager(t, 1, func(c *sandbox.Config) {
		c.LimitsFor = func(context.Context, sandbox.Scope) sandbox.Limits { return sandbox.Limits{MemoryMiB: 128} }
	})
	refill(t, m, 1)
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	if res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo hi", Timeout: 10 * time.Second}); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("first command: %+v, %v", res, err)
	}
	s := poolStats(t, m)
	if s.Claims != 0 || s.Misses[sandbox.PoolMissShape] != 1 || s.Ready != 1 {
		t.Errorf("pool after a chat of another shape: %+v; want no claim, one shape miss, the member kept", s)
	}
	if inst, err := m.Lookup(ctx(t), scope); err != nil || inst.Limit.MemoryMiB != 128 {
		t.Errorf("the chat's record: %+v, %v; want its app's 128 MiB", inst, err)
	}
}

// TestPoolReconcile: a member the database does not know and a document
// whose member is gone are removed once old enough; with the pool turned
// off, its members go at once.
func TestPoolReconcile(t *testing.T) {
	e := newPoolEnv(t)
	m := e.manager(t, 2, nil)
	refill(t, m, 2)
	members, _ := e.store.Members(ctx(t), "bwrap")
	// One member loses its document, the other its sandbox.
	if err := e.store.RemoveMember(ctx(t), "bwrap", members[0].PoolID); err != nil {
		t.Fatal(err)
	}
	if err := e.provider.Delete(ctx(t), members[1].PoolID); err != nil {
		t.Fatal(err)
	}
	list, _ := e.provider.List(ctx(t))
	if n, err := m.ReconcilePool(ctx(t), list, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("ReconcilePool of young members removed %d, %v; want 0", n, err)
	}
	if n, err := m.ReconcilePool(ctx(t), list, time.Now().Add(time.Minute)); err != nil || n != 2 {
		t.Fatalf("ReconcilePool removed %d, %v; want 2", n, err)
	}
	if st, _ := e.provider.Status(ctx(t), members[0].PoolID); st != sandbox.StatusMissing {
		t.Errorf("the member without a document: %s", st)
	}
	if left, _ := e.store.Members(ctx(t), "bwrap"); len(left) != 0 {
		t.Errorf("documents left: %+v", left)
	}

	refill(t, m, 2)
	off := e.manager(t, 0, nil)
	if _, ok, _ := off.PoolStats(ctx(t)); ok {
		t.Errorf("PoolStats of a pool of size 0 says it is on")
	}
	list, _ = e.provider.List(ctx(t))
	if n, err := off.ReconcilePool(ctx(t), list, time.Now().Add(-time.Hour)); err != nil || n != 2 {
		t.Fatalf("ReconcilePool with the pool off removed %d, %v; want both members", n, err)
	}
	list, _ = e.provider.List(ctx(t))
	for _, r := range list {
		if r.Pool {
			t.Errorf("member %s left with the pool off", r.ID)
		}
	}
}
