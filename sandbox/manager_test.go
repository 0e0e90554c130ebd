package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// clock is an injected clock tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	db       *mongo.Database
	store    *mongostore.Store
	provider *bwrap.Provider
	clock    *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	db := mongotest.DB(t)
	store, err := mongostore.New(context.Background(), db, slog.Default())
	if err != nil {
		t.Fatalf("mongostore.New: %v", err)
	}
	return &env{db: db, store: store, provider: p, clock: &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
}

func (e *env) manager(t *testing.T, mw ...sandbox.Middleware) *sandbox.Manager {
	t.Helper()
	m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Now: e.clock.Now, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) records(t *testing.T, id string) int64 {
	t.Helper()
	n, err := e.db.Collection("sandbox_instances").CountDocuments(context.Background(), bson.M{"sandboxId": id})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

var chatSeq atomic.Int64

func newScope(t *testing.T) sandbox.Scope {
	return sandbox.Scope{AppID: "app-" + t.Name(), UserID: "user-1", ChatID: "chat-" + time.Now().Format("150405.000000") + "-" + string(rune('a'+chatSeq.Add(1)%26))}
}

func TestLazyCreationAndRecord(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	scope := newScope(t)
	id := scope.SandboxID()
	t.Cleanup(func() { _ = m.Delete(context.Background(), id) })

	if _, err := m.Lookup(ctx(t), scope); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Lookup before first use: err = %v, want ErrNotFound", err)
	}
	if st, _ := e.provider.Status(ctx(t), id); st != sandbox.StatusMissing {
		t.Fatalf("provider status before first use = %q, want missing", st)
	}
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo hello"})
	if err != nil || res.Stdout != "hello\n" || res.ExitCode != 0 {
		t.Fatalf("first Exec = %+v, %v", res, err)
	}
	inst, err := m.Lookup(ctx(t), scope)
	if err != nil {
		t.Fatalf("Lookup after first use: %v", err)
	}
	want := sandbox.Instance{Provider: "bwrap", SandboxID: id, AppID: scope.AppID, UserID: scope.UserID, ChatID: scope.ChatID, Status: sandbox.StatusRunning}
	if inst.Provider != want.Provider || inst.SandboxID != want.SandboxID || inst.AppID != want.AppID ||
		inst.UserID != want.UserID || inst.ChatID != want.ChatID || inst.Status != want.Status {
		t.Fatalf("record = %+v, want %+v", inst, want)
	}
	if !inst.LastActiveAt.Equal(e.clock.Now()) || !inst.CreatedAt.Equal(e.clock.Now()) {
		t.Fatalf("times = created %v, active %v; want both %v", inst.CreatedAt, inst.LastActiveAt, e.clock.Now())
	}

	// Every command refreshes lastActiveAt (S5); createdAt stays.
	created := e.clock.Now()
	e.clock.Add(3 * time.Minute)
	if _, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	inst, _ = m.Lookup(ctx(t), scope)
	if !inst.LastActiveAt.Equal(e.clock.Now()) || !inst.CreatedAt.Equal(created) {
		t.Fatalf("after a second command: created %v active %v; want %v and %v", inst.CreatedAt, inst.LastActiveAt, created, e.clock.Now())
	}
}

func TestConcurrentFirstCallsCreateOne(t *testing.T) {
	e := newEnv(t)
	// Two managers stand for two engine processes: they share nothing but
	// the database and the machine.
	managers := []*sandbox.Manager{e.manager(t), e.manager(t)}
	scope := newScope(t)
	id := scope.SandboxID()
	t.Cleanup(func() { _ = managers[0].Delete(context.Background(), id) })

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(m *sandbox.Manager) {
			defer wg.Done()
			res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo ok >> calls.log; echo ok"})
			if err == nil && res.Stdout != "ok\n" {
				err = errors.New("stdout " + res.Stdout + " stderr " + res.Stderr)
			}
			errs <- err
		}(managers[i%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent first call: %v", err)
		}
	}
	if n := e.records(t, id); n != 1 {
		t.Fatalf("%d records after 20 concurrent first calls, want 1", n)
	}
	list, _ := e.provider.List(ctx(t))
	n := 0
	for _, r := range list {
		if r.ID == id {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("provider holds %d sandboxes for the chat, want 1", n)
	}
	res, _ := managers[0].Exec(ctx(t), scope, sandbox.ExecRequest{Command: "wc -l < calls.log"})
	if strings.TrimSpace(res.Stdout) != "20" {
		t.Fatalf("the 20 calls wrote %q lines into one workspace, want 20", res.Stdout)
	}
}

func TestChatsAreIsolated(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	a, b := newScope(t), newScope(t)
	b.ChatID += "-other"
	for _, s := range []sandbox.Scope{a, b} {
		id := s.SandboxID()
		t.Cleanup(func() { _ = m.Delete(context.Background(), id) })
	}
	m.Exec(ctx(t), a, sandbox.ExecRequest{Command: "echo secret > a.txt; export MARK=a"})
	res, err := m.Exec(ctx(t), b, sandbox.ExecRequest{Command: `ls; echo "mark=$MARK"`})
	if err != nil || res.Stdout != "mark=\n" {
		t.Fatalf("another chat sees %q (err %v); want an empty workspace and no variable", res.Stdout, err)
	}
}

func TestProviderDownGivesMinusOne(t *testing.T) {
	e := newEnv(t)
	broken, err := bwrap.New(bwrap.Config{Root: t.TempDir(), BwrapPath: "/nonexistent/bwrap"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.New(sandbox.Config{Provider: broken, Store: e.store, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var res sandbox.ExecResult
	go func() {
		defer close(done)
		res, err = m.Exec(ctx(t), newScope(t), sandbox.ExecRequest{Command: "echo hi"})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Exec hangs when the provider is down")
	}
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if res.ExitCode != -1 || !strings.Contains(res.Stderr, "sandbox service temporarily unavailable, retry later") {
		t.Fatalf("result = %+v, want exitCode -1 and the retry message", res)
	}
}

func TestStopStartDelete(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	scope := newScope(t)
	id := scope.SandboxID()
	if _, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "cd /tmp; export V=1; echo data > /workspace/f"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx(t), id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if inst, _ := m.Lookup(ctx(t), scope); inst.Status != sandbox.StatusStopped {
		t.Fatalf("record status after Stop = %q, want %q", inst.Status, sandbox.StatusStopped)
	}
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: `echo "$V $(pwd) $(cat /workspace/f)"`})
	if err != nil || res.Stdout != "1 /tmp data\n" {
		t.Fatalf("after stop and wake: %+v, %v; want %q", res, err, "1 /tmp data\n")
	}
	if inst, _ := m.Lookup(ctx(t), scope); inst.Status != sandbox.StatusRunning {
		t.Fatalf("record status after wake = %q, want running", inst.Status)
	}
	if err := m.Delete(ctx(t), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := m.Lookup(ctx(t), scope); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Lookup after Delete: %v, want ErrNotFound", err)
	}
	if st, _ := e.provider.Status(ctx(t), id); st != sandbox.StatusMissing {
		t.Fatalf("provider status after Delete = %q", st)
	}
	if err := m.Delete(ctx(t), id); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestFilesCreatesLazily(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	files, err := m.Files(ctx(t), scope, sandbox.Actor{UserID: scope.UserID, Kind: sandbox.ActorFiles})
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	if err := files.WriteFile(ctx(t), "/workspace/from-ui.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	res, _ := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "cat from-ui.txt"})
	if res.Stdout != "hi" {
		t.Fatalf("the agent sees %q, want the file the user wrote", res.Stdout)
	}
}

// timeouts records the timeout of every command the provider is given.
type timeouts struct {
	sandbox.Provider
	mu   sync.Mutex
	seen []time.Duration
}

func (p *timeouts) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	p.mu.Lock()
	p.seen = append(p.seen, req.Timeout)
	p.mu.Unlock()
	return p.Provider.Exec(ctx, id, req)
}

func TestTimeoutIsClamped(t *testing.T) {
	e := newEnv(t)
	p := &timeouts{Provider: e.provider}
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: e.store, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	tests := []struct{ asked, want time.Duration }{
		{10 * time.Millisecond, time.Second},
		{0, sandbox.DefaultTimeout},
		{7 * time.Second, 7 * time.Second},
		{time.Hour, sandbox.MaxTimeout},
	}
	for _, tc := range tests {
		if _, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "true", Timeout: tc.asked}); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		got := p.seen[len(p.seen)-1]
		p.mu.Unlock()
		if got != tc.want {
			t.Errorf("asked for %v: the provider was given %v, want %v", tc.asked, got, tc.want)
		}
	}
}

func TestMiddlewareWrapsExec(t *testing.T) {
	e := newEnv(t)
	var order []string
	deny := func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, c *sandbox.Call) (sandbox.ExecResult, error) {
			order = append(order, "filter")
			if strings.Contains(c.Request.Command, "forbidden") {
				return sandbox.ExecResult{ExitCode: 126, Stderr: "refused by policy"}, nil
			}
			return next(ctx, c)
		}
	}
	redact := func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, c *sandbox.Call) (sandbox.ExecResult, error) {
			order = append(order, "redact")
			res, err := next(ctx, c)
			res.Stdout = strings.ReplaceAll(res.Stdout, "sk-secret", "[REDACTED]")
			return res, err
		}
	}
	m := e.manager(t, sandbox.Middleware{Exec: deny}, sandbox.Middleware{Exec: redact})
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })

	res, _ := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "forbidden thing"})
	if res.ExitCode != 126 {
		t.Fatalf("refused call = %+v", res)
	}
	if _, err := m.Lookup(ctx(t), scope); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatal("a refused command created a sandbox")
	}
	res, _ = m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo key=sk-secret"})
	if res.Stdout != "key=[REDACTED]\n" {
		t.Fatalf("stdout = %q, want the redacted form", res.Stdout)
	}
	if strings.Join(order, ",") != "filter,filter,redact" {
		t.Fatalf("middleware order = %v", order)
	}
}

func TestScopeRequiresIDs(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	_, err := m.Exec(ctx(t), sandbox.Scope{AppID: "a", UserID: "u"}, sandbox.ExecRequest{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "chatId") {
		t.Fatalf("err = %v, want it to name the missing chatId", err)
	}
}

// Another engine process (here a second manager) stops the sandbox behind
// this one's back: the next command still runs, in the restarted sandbox,
// with its state, and the record says running again.
func TestStoppedElsewhereIsRestarted(t *testing.T) {
	e := newEnv(t)
	here, elsewhere := e.manager(t), e.manager(t)
	scope := newScope(t)
	id := scope.SandboxID()
	t.Cleanup(func() { _ = here.Delete(context.Background(), id) })
	if _, err := here.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "export K=v; echo x > f"}); err != nil {
		t.Fatal(err)
	}
	if err := elsewhere.Stop(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	res, err := here.Exec(ctx(t), scope, sandbox.ExecRequest{Command: `echo "$K $(cat f)"`})
	if err != nil || res.Stdout != "v x\n" {
		t.Fatalf("after a stop elsewhere: %+v, %v; want %q", res, err, "v x\n")
	}
	if inst, _ := here.Lookup(ctx(t), scope); inst.Status != sandbox.StatusRunning {
		t.Fatalf("record status = %q, want running", inst.Status)
	}
	if st, _ := e.provider.Status(ctx(t), id); st != sandbox.StatusRunning {
		t.Fatalf("provider status = %q, want running", st)
	}
}

// A command for a chat whose deletion was requested fails with ErrDeleted
// and creates nothing, whether the chat never had a sandbox, or had one
// that this process used a moment ago (the fast path).
func TestDeletedChatIsRefused(t *testing.T) {
	tests := []struct {
		name    string
		usedYet bool
	}{
		{"never used", false},
		{"used just before", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			// The chat's directories: none is made for a deleted chat (made,
			// they would race the deletion's removal of them).
			var made atomic.Int64
			m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Now: e.clock.Now,
				MountsFor: func(context.Context, sandbox.Scope) ([]sandbox.Mount, error) {
					made.Add(1)
					return nil, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			scope := newScope(t)
			id := scope.SandboxID()
			t.Cleanup(func() { _ = m.Delete(context.Background(), id) })
			if tc.usedYet {
				if _, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "true"}); err != nil {
					t.Fatal(err)
				}
			}
			// What the deletion does: the intent, then the sandbox and record.
			made.Store(0)
			err = e.store.RequestDeletions(ctx(t), []mongostore.Deletion{mongostore.ChatDeletion(scope, "task", e.clock.Now())})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.provider.Delete(ctx(t), id); err != nil {
				t.Fatal(err)
			}
			if err := e.store.Delete(ctx(t), "bwrap", id); err != nil {
				t.Fatal(err)
			}

			res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo back"})
			if !errors.Is(err, sandbox.ErrDeleted) || res.ExitCode != -1 || !strings.Contains(res.Stderr, "deleted") {
				t.Fatalf("command of a deleted chat: %+v, %v; want exit -1, a message saying so, ErrDeleted", res, err)
			}
			if n := e.records(t, id); n != 0 {
				t.Errorf("%d records after the refused command, want 0", n)
			}
			if n := made.Load(); n != 0 {
				t.Errorf("the refused command made the chat's directories %d times, want none", n)
			}
			if st, _ := e.provider.Status(ctx(t), id); st != sandbox.StatusMissing {
				t.Errorf("provider status after the refused command = %q, want missing", st)
			}
		})
	}
}

// heldRefresh holds each record refresh until released.
type heldRefresh struct {
	sandbox.Store
	entered, release chan struct{}
}

func (s *heldRefresh) Refresh(ctx context.Context, inst sandbox.Instance, now time.Time) error {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.Refresh(ctx, inst, now)
}

// A warm sandbox's command returns without waiting for its record's
// refresh (S5), which follows it; a stop that comes in between is not
// undone by it, and the next command starts the sandbox again.
func TestWarmRefreshFollowsTheCommand(t *testing.T) {
	e := newEnv(t)
	store := &heldRefresh{Store: e.store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: store, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	scope := newScope(t)
	id := scope.SandboxID()
	t.Cleanup(func() { _ = m.Delete(context.Background(), id) })
	if _, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute) // within WarmWindow
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo warm"})
	if err != nil || res.Stdout != "warm\n" {
		t.Fatalf("warm command: %+v, %v", res, err)
	}
	select {
	case <-store.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no record refresh followed the warm command")
	}
	used := e.clock.Now()
	if err := m.Stop(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	m.Close()
	inst, err := e.store.Get(ctx(t), "bwrap", id)
	if err != nil || inst.Status != sandbox.StatusStopped || !inst.LastActiveAt.Equal(used) {
		t.Fatalf("record after the late refresh: %+v, %v; want it stopped, last active %v", inst, err, used)
	}
	// The next command goes through the ensure, which starts it again.
	res, err = m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo again"})
	if err != nil || res.Stdout != "again\n" {
		t.Fatalf("command after the stop: %+v, %v", res, err)
	}
	if inst, _ := e.store.Get(ctx(t), "bwrap", id); inst.Status != sandbox.StatusRunning {
		t.Fatalf("record after the next command: %s, want running", inst.Status)
	}
	if st, _ := e.provider.Status(ctx(t), id); st != sandbox.StatusRunning {
		t.Fatalf("provider status after the next command: %s, want running", st)
	}
}

// touches counts the record refreshes the manager makes and passes on
// the time of those that succeed.
type touches struct {
	sandbox.Store
	busy atomic.Int64
	done chan time.Time
}

func (s *touches) Touch(ctx context.Context, inst sandbox.Instance, now time.Time) error {
	err := s.Store.Touch(ctx, inst, now)
	switch {
	case errors.Is(err, sandbox.ErrBusy):
		s.busy.Add(1)
	case err == nil && s.done != nil:
		s.done <- now
	}
	return err
}

// A command that meets a sandbox held by the stop scan for longer than
// BusyWait gives up with a clear, retryable error, having created nothing.
// The wait runs on the injected clock: it tries again while the clock
// moves, and gives up once BusyWait of it has passed.
func TestBusyWaitIsBounded(t *testing.T) {
	e := newEnv(t)
	fc := newStepClock()
	store := &touches{Store: e.store}
	const busyWait = time.Minute
	m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: store, Now: e.clock.Now, Clock: fc, BusyWait: busyWait})
	if err != nil {
		t.Fatal(err)
	}
	scope := newScope(t)
	id := scope.SandboxID()
	if _, err := e.store.Claim(ctx(t), "bwrap", []string{id}, "a-stuck-scan", "stop", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "true"})
		done <- result{res, err}
	}()
	var waited time.Duration
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case w := <-fc.waits:
			waited += w.d
			if waited > 2*busyWait {
				t.Fatalf("still waiting after %v of clock time; BusyWait is %v", waited, busyWait)
			}
			fc.end(w)
		case <-time.After(time.Minute):
			t.Fatal("the command neither waits on the clock nor returns")
		}
	}
	if !errors.Is(r.err, sandbox.ErrUnavailable) || !errors.Is(r.err, sandbox.ErrBusy) || r.res.ExitCode != -1 {
		t.Fatalf("command meeting a held sandbox: %+v, %v; want exit -1, ErrUnavailable and ErrBusy", r.res, r.err)
	}
	if waited != busyWait {
		t.Errorf("gave up after %v of clock time, want the BusyWait of %v", waited, busyWait)
	}
	if n := store.busy.Load(); n < 2 {
		t.Errorf("the record was tried %d times while held, want it tried again while waiting", n)
	}
	if !strings.Contains(r.res.Stderr, "still being stopped") {
		t.Errorf("message %q does not say why", r.res.Stderr)
	}
	if st, _ := e.provider.Status(ctx(t), id); st != sandbox.StatusMissing {
		t.Errorf("provider status = %q, want missing: nothing may be created under a claim", st)
	}
}
