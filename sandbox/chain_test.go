package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// stepClock is a fake sandbox.Clock: every wait the code under test
// begins is handed to the test (waits), which moves the clock to its end
// and ends it.
type stepClock struct {
	clock
	waits chan stepWait
}

type stepWait struct {
	d time.Duration
	c chan time.Time
}

func newStepClock() *stepClock {
	return &stepClock{clock: clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, waits: make(chan stepWait, 1000)}
}

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- stepWait{d, ch}
	return ch
}

// next returns the next wait the code under test began.
func (c *stepClock) next(t *testing.T, what string) stepWait {
	t.Helper()
	select {
	case w := <-c.waits:
		return w
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the code under test never waited on the clock", what)
	}
	panic("unreachable")
}

// end moves the clock to the end of w and ends it.
func (c *stepClock) end(w stepWait) {
	c.Add(w.d)
	w.c <- c.Now()
}

// received waits for a value the code under test sends, failing the test
// if none comes; the bound only keeps a broken test from hanging.
func received[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing happened", what)
	}
	panic("unreachable")
}

// scripted is a provider whose commands the test plays: play writes the
// command's output through a Collector, as real providers do, and returns
// its exit code. Each sandbox's files are a directory.
type scripted struct {
	root string
	play func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int
	mu   sync.Mutex
	up   map[string]bool
}

var _ sandbox.Provider = (*scripted)(nil)

func newScripted(t *testing.T, play func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int) *scripted {
	return &scripted{root: t.TempDir(), play: play, up: map[string]bool{}}
}

func (p *scripted) Name() string                          { return "scripted" }
func (p *scripted) Capabilities() sandbox.Capabilities    { return sandbox.Capabilities{Streaming: true} }
func (p *scripted) Fingerprint(ctx context.Context) error { return nil }

func (p *scripted) Ensure(ctx context.Context, spec sandbox.Spec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up[spec.ID] = true
	return os.MkdirAll(filepath.Join(p.root, spec.ID), 0o755)
}

func (p *scripted) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if st, _ := p.Status(ctx, id); st != sandbox.StatusRunning {
		return sandbox.ExecResult{}, sandbox.ErrNotFound
	}
	col := sandbox.NewCollector(0, req.OnOutput)
	exit := p.play(ctx, req, col)
	return col.Result(exit, false, req.Timeout, time.Millisecond), nil
}

func (p *scripted) Stop(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.up, id)
	return nil
}

func (p *scripted) Delete(ctx context.Context, id string) error {
	p.Stop(ctx, id)
	return os.RemoveAll(filepath.Join(p.root, id))
}

func (p *scripted) Status(ctx context.Context, id string) (sandbox.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up[id] {
		return sandbox.StatusRunning, nil
	}
	if _, err := os.Stat(filepath.Join(p.root, id)); err == nil {
		return sandbox.StatusStopped, nil
	}
	return sandbox.StatusMissing, nil
}

func (p *scripted) Files(ctx context.Context, id string) (sandbox.Files, error) {
	if st, _ := p.Status(ctx, id); st == sandbox.StatusMissing {
		return nil, sandbox.ErrNotFound
	}
	return sandbox.DirFiles{Dir: filepath.Join(p.root, id)}, nil
}

func (p *scripted) List(ctx context.Context) ([]sandbox.Resource, error) { return nil, nil }

func newStore(t *testing.T) *mongostore.Store {
	t.Helper()
	store, err := mongostore.New(context.Background(), mongotest.DB(t), slog.Default())
	if err != nil {
		t.Fatalf("mongostore.New: %v", err)
	}
	return store
}

func newManager(t *testing.T, cfg sandbox.Config) *sandbox.Manager {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = newStore(t)
	}
	m, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// live collects what reaches a caller's OnOutput, and fails the test if
// it is called concurrently or after Exec returned.
type live struct {
	t        *testing.T
	mu       sync.Mutex
	out, err strings.Builder
	chunks   []string
	inside   atomic.Int32
	returned atomic.Bool
}

func (l *live) sink(s sandbox.Stream, p []byte) {
	if l.inside.Add(1) > 1 {
		l.t.Error("OnOutput called concurrently")
	}
	defer l.inside.Add(-1)
	if l.returned.Load() {
		l.t.Errorf("OnOutput called after Exec returned, with %q", p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chunks = append(l.chunks, string(p))
	if s == sandbox.Stderr {
		l.err.Write(p)
	} else {
		l.out.Write(p)
	}
}

func (l *live) exec(ctx context.Context, m *sandbox.Manager, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	req.OnOutput = l.sink
	res, err := m.Exec(ctx, scope, req)
	l.returned.Store(true)
	return res, err
}

func (l *live) streams() (stdout, stderr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String(), l.err.String()
}

// redactor replaces "SECRET" with "[redacted]" and holds back the end of
// a chunk that could begin one.
type redactor struct{ held []byte }

const secret = "SECRET"

func (r *redactor) Transform(p []byte) []byte {
	buf := bytes.ReplaceAll(append(r.held, p...), []byte(secret), []byte("[redacted]"))
	keep := 0
	for k := min(len(secret)-1, len(buf)); k > 0; k-- {
		if bytes.HasSuffix(buf, []byte(secret[:k])) {
			keep = k
			break
		}
	}
	r.held = append([]byte(nil), buf[len(buf)-keep:]...)
	return buf[:len(buf)-keep]
}

func (r *redactor) Flush() []byte {
	out := r.held
	r.held = nil
	return out
}

func redact(sandbox.Stream) sandbox.StreamTransformer { return &redactor{} }

// chunks writes each chunk in turn to its stream.
func chunks(col *sandbox.Collector, parts ...any) {
	w := col.Stdout()
	for _, p := range parts {
		switch p := p.(type) {
		case sandbox.Stream:
			if w = col.Stdout(); p == sandbox.Stderr {
				w = col.Stderr()
			}
		case string:
			w.Write([]byte(p))
		}
	}
}

// A secret cut across chunks, on both streams at once, never reaches the
// live output whole or in part; what was held back at the end of each
// stream is let out before Exec returns; the final result says the same.
func TestTransformHoldsBackAcrossChunks(t *testing.T) {
	p := newScripted(t, func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int {
		chunks(col, "key=SEC", sandbox.Stderr, "warn SEC", sandbox.Stdout, "RET; more=SE", "CR", sandbox.Stderr, "RET\n",
			sandbox.Stdout, "ET tail SE")
		return 0
	})
	m := newManager(t, sandbox.Config{Provider: p, Middleware: []sandbox.Middleware{sandbox.TransformOutput(redact)}})
	l := &live{t: t}
	res, err := l.exec(ctx(t), m, newScope(t), sandbox.ExecRequest{Command: "show"})
	if err != nil {
		t.Fatal(err)
	}
	const wantOut, wantErr = "key=[redacted]; more=[redacted] tail SE", "warn [redacted]\n"
	out, errOut := l.streams()
	if out != wantOut || errOut != wantErr {
		t.Errorf("live output: stdout %q stderr %q (chunks %q); want %q and %q", out, errOut, l.chunks, wantOut, wantErr)
	}
	if res.Stdout != wantOut || res.Stderr != wantErr {
		t.Errorf("result: stdout %q stderr %q; want %q and %q", res.Stdout, res.Stderr, wantOut, wantErr)
	}
}

// Output over the cap: the transform sees the stream before the cut, so
// the final result cannot hold the half of a secret the cut would leave.
func TestTransformBeforeTheCap(t *testing.T) {
	head := strings.Repeat("x", sandbox.DefaultOutputLimit/2-3)
	p := newScripted(t, func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int {
		all := head + secret + strings.Repeat("y", sandbox.DefaultOutputLimit)
		for len(all) > 0 {
			n := min(4000, len(all))
			chunks(col, all[:n])
			all = all[n:]
		}
		return 0
	})
	m := newManager(t, sandbox.Config{Provider: p, Middleware: []sandbox.Middleware{sandbox.TransformOutput(redact)}})
	l := &live{t: t}
	res, err := l.exec(ctx(t), m, newScope(t), sandbox.ExecRequest{Command: "show"})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := l.streams(); strings.Contains(out, "SEC") || !strings.Contains(out, head+"[redacted]yyy") {
		t.Errorf("live stdout around the secret: %q", out[len(head)-5:len(head)+20])
	}
	if !res.Truncated || !strings.HasPrefix(res.Stdout, head+"[re") || strings.Contains(res.Stdout, "SEC") {
		t.Errorf("result stdout (truncated %v) begins ...%q; want the redacted stream cut after %q", res.Truncated, res.Stdout[len(head)-5:len(head)+10], "[re")
	}
}

// However the provider (here, one that misbehaves) calls OnOutput, the
// caller's sink is called one chunk at a time and never after Exec
// returned.
func TestLiveOutputIsSerialisedAndEndsWithExec(t *testing.T) {
	release, late := make(chan struct{}), make(chan struct{})
	p := newScripted(t, func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int {
		var wg sync.WaitGroup
		for _, s := range []sandbox.Stream{sandbox.Stdout, sandbox.Stderr} {
			wg.Go(func() {
				for range 200 {
					req.OnOutput(s, []byte("ab"))
				}
			})
		}
		wg.Wait()
		go func() {
			<-release
			req.OnOutput(sandbox.Stdout, []byte("late"))
			close(late)
		}()
		return 0
	})
	m := newManager(t, sandbox.Config{Provider: p, Middleware: []sandbox.Middleware{sandbox.TransformOutput(redact), {}}})
	l := &live{t: t}
	if _, err := l.exec(ctx(t), m, newScope(t), sandbox.ExecRequest{Command: "show"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	received(t, late, "the late write")
	out, errOut := l.streams()
	if want := strings.Repeat("ab", 200); out != want || errOut != want {
		t.Errorf("live stdout %d bytes, stderr %d bytes; want %d each, and no late output", len(out), len(errOut), len(want))
	}
}

// replace is a transform of single bytes.
func replace(from, to byte) func(sandbox.Stream) sandbox.StreamTransformer {
	return func(sandbox.Stream) sandbox.StreamTransformer {
		return sandbox.TransformFunc(func(p []byte) []byte { return bytes.ReplaceAll(p, []byte{from}, []byte{to}) })
	}
}

// logged records when each hook of a middleware is entered and left.
func logged(name string, log *[]string, mu *sync.Mutex) sandbox.Middleware {
	note := func(s string) {
		mu.Lock()
		*log = append(*log, s)
		mu.Unlock()
	}
	return sandbox.Middleware{
		Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
			return func(ctx context.Context, c *sandbox.Call) (sandbox.ExecResult, error) {
				note(name + ">")
				defer note("<" + name)
				return next(ctx, c)
			}
		},
		File: func(next sandbox.FileFunc) sandbox.FileFunc {
			return func(ctx context.Context, c *sandbox.FileCall) (sandbox.FileResult, error) {
				note(name + ">")
				defer note("<" + name)
				return next(ctx, c)
			}
		},
	}
}

// Config.Middleware lists the chain outermost first, for commands, their
// live output and file operations alike.
func TestMiddlewareOrder(t *testing.T) {
	p := newScripted(t, func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int {
		chunks(col, "x")
		return 0
	})
	var mu sync.Mutex
	var log []string
	m := newManager(t, sandbox.Config{Provider: p, Middleware: []sandbox.Middleware{
		logged("a", &log, &mu), sandbox.TransformOutput(replace('x', 'y')),
		logged("b", &log, &mu), sandbox.TransformOutput(replace('y', 'z')),
		logged("c", &log, &mu),
	}})
	scope := newScope(t)
	l := &live{t: t}
	res, err := l.exec(ctx(t), m, scope, sandbox.ExecRequest{Command: "show"})
	if err != nil {
		t.Fatal(err)
	}
	// The inner transform (y→z) sees "x" first; the outer one makes it "y".
	if out, _ := l.streams(); out != "y" || res.Stdout != "y" {
		t.Errorf("live %q, result %q; want %q: the outer transform applied last", out, res.Stdout, "y")
	}
	want := "a>,b>,c>,<c,<b,<a"
	if got := strings.Join(log, ","); got != want {
		t.Errorf("exec hooks ran %s, want %s", got, want)
	}
	log = nil
	files, err := m.Files(ctx(t), scope, sandbox.Actor{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := files.List(ctx(t), "/workspace"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(log, ","); got != want {
		t.Errorf("file hooks ran %s, want %s", got, want)
	}
}

// upperReads upper-cases what file reads return.
func upperReads(next sandbox.FileFunc) sandbox.FileFunc {
	return func(ctx context.Context, c *sandbox.FileCall) (sandbox.FileResult, error) {
		r, err := next(ctx, c)
		r.Data = bytes.ToUpper(r.Data)
		if r.Reader != nil {
			data, rerr := io.ReadAll(r.Reader)
			r.Reader.Close()
			if rerr != nil {
				return sandbox.FileResult{}, rerr
			}
			r.Reader = io.NopCloser(bytes.NewReader(bytes.ToUpper(data)))
		}
		return r, err
	}
}

// A middleware that rewrites output rewrites the live chunks, the final
// result and what file reads return, in a real sandbox.
func TestMiddlewareRewritesOutputAndReads(t *testing.T) {
	e := newEnv(t)
	upper := sandbox.TransformOutput(func(sandbox.Stream) sandbox.StreamTransformer { return sandbox.TransformFunc(bytes.ToUpper) })
	upper.File = upperReads
	m := e.manager(t, upper)
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	l := &live{t: t}
	res, err := l.exec(ctx(t), m, scope, sandbox.ExecRequest{Command: "echo hello; echo warn >&2; printf 'file body' > f.txt"})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut := l.streams()
	if out != "HELLO\n" || errOut != "WARN\n" {
		t.Errorf("live stdout %q stderr %q, want %q and %q", out, errOut, "HELLO\n", "WARN\n")
	}
	if res.Stdout != "HELLO\n" || res.Stderr != "WARN\n" {
		t.Errorf("result stdout %q stderr %q, want %q and %q", res.Stdout, res.Stderr, "HELLO\n", "WARN\n")
	}
	files, err := m.Files(ctx(t), scope, sandbox.Actor{UserID: scope.UserID, Kind: sandbox.ActorFiles})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := files.ReadFile(ctx(t), "f.txt", 1<<20); err != nil || string(data) != "FILE BODY" {
		t.Errorf("ReadFile = %q, %v; want %q", data, err, "FILE BODY")
	}
	rc, _, err := files.Open(ctx(t), "/workspace/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if data, _ := io.ReadAll(rc); string(data) != "FILE BODY" {
		t.Errorf("Open reads %q, want %q", data, "FILE BODY")
	}
}

var errRefused = errors.New("refused by policy")

// The caller's identity reaches the middleware of commands and of file
// operations, and a file hook can refuse an operation: the caller gets
// its error, and a refused first operation creates no sandbox.
func TestIdentityReachesTheChain(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var calls []sandbox.Call
	var fileCalls []sandbox.FileCall
	policy := sandbox.Middleware{
		Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
			return func(ctx context.Context, c *sandbox.Call) (sandbox.ExecResult, error) {
				mu.Lock()
				calls = append(calls, *c)
				mu.Unlock()
				return next(ctx, c)
			}
		},
		File: func(next sandbox.FileFunc) sandbox.FileFunc {
			return func(ctx context.Context, c *sandbox.FileCall) (sandbox.FileResult, error) {
				mu.Lock()
				fileCalls = append(fileCalls, *c)
				mu.Unlock()
				if c.Actor.Kind == sandbox.ActorAdmin && c.Op == sandbox.FileWrite {
					return sandbox.FileResult{}, errRefused
				}
				return next(ctx, c)
			}
		},
	}
	m := e.manager(t, policy)
	scope := newScope(t)
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })

	admin := sandbox.Actor{UserID: "admin-1", Kind: sandbox.ActorAdmin}
	files, err := m.Files(ctx(t), scope, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile(ctx(t), "notes.txt", []byte("x")); !errors.Is(err, errRefused) {
		t.Fatalf("a refused write returned %v, want the hook's error", err)
	}
	if _, err := m.Lookup(ctx(t), scope); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a refused file operation created a sandbox (Lookup: %v)", err)
	}
	if _, err := files.List(ctx(t), "/workspace"); err != nil {
		t.Fatalf("an allowed list: %v", err)
	}
	want := []sandbox.FileCall{
		{Actor: admin, Scope: scope, SandboxID: scope.SandboxID(), Op: sandbox.FileWrite, Path: "notes.txt", Data: []byte("x")},
		{Actor: admin, Scope: scope, SandboxID: scope.SandboxID(), Op: sandbox.FileList, Path: "/workspace"},
	}
	if len(fileCalls) != len(want) {
		t.Fatalf("the file hook saw %d calls, want %d", len(fileCalls), len(want))
	}
	for i, c := range fileCalls {
		w := want[i]
		if c.Actor != w.Actor || c.Scope != w.Scope || c.SandboxID != w.SandboxID || c.Op != w.Op || c.Path != w.Path || string(c.Data) != string(w.Data) {
			t.Errorf("file call %d: got %+v, want %+v", i, c, w)
		}
	}

	agent := sandbox.Actor{UserID: scope.UserID, Kind: sandbox.ActorAgent, ToolCallID: "call_7"}
	if _, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "true", Actor: agent}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Request.Actor != agent || calls[0].Scope != scope || calls[0].SandboxID != scope.SandboxID() {
		t.Fatalf("the exec hook saw %+v, want one call by %+v in %+v", calls, agent, scope)
	}
}

// A command that runs longer than IdleAfter keeps its record fresh: the
// heartbeat waits Config.Heartbeat on the injected clock, then refreshes
// the record with the time then, and goes on.
func TestHeartbeatDuringLongCommand(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	p := newScripted(t, func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int {
		close(running)
		<-release
		return 0
	})
	fc := newStepClock()
	store := &touches{Store: newStore(t), done: make(chan time.Time, 100)}
	const beat = time.Minute
	m := newManager(t, sandbox.Config{Provider: p, Store: store, Now: fc.Now, Clock: fc, Heartbeat: beat})
	scope := newScope(t)
	done := make(chan error, 1)
	go func() {
		_, err := m.Exec(context.Background(), scope, sandbox.ExecRequest{Command: "long"})
		done <- err
	}()
	received(t, running, "the command starts")
	if at := received(t, store.done, "the record written before the command"); !at.Equal(fc.Now()) {
		t.Fatalf("first refresh at %v, want %v", at, fc.Now())
	}
	w := fc.next(t, "the heartbeat")
	if w.d != beat {
		t.Fatalf("the heartbeat waits %v, want %v", w.d, beat)
	}
	fc.Add(sandbox.IdleAfter) // the command has run for six minutes now
	fc.end(w)
	if at := received(t, store.done, "a heartbeat refresh"); !at.Equal(fc.Now()) {
		t.Fatalf("heartbeat refresh at %v, want %v", at, fc.Now())
	}
	if w := fc.next(t, "the next heartbeat"); w.d != beat {
		t.Fatalf("the next heartbeat waits %v, want %v", w.d, beat)
	}
	select {
	case err := <-done:
		t.Fatalf("the command ended (%v) before it was released; the test shows nothing", err)
	default:
	}
	close(release)
	if err := received(t, done, "the command ends"); err != nil {
		t.Fatal(err)
	}
	inst, err := m.Lookup(ctx(t), scope)
	if err != nil || !inst.LastActiveAt.Equal(fc.Now()) {
		t.Fatalf("record after the command: %+v, %v; want lastActiveAt %v", inst, err, fc.Now())
	}
}
