package client_test

// The client against a real engine (enginetest: the product as engine
// serve builds it, bwrap sandboxes, the embedded database), as a program
// using the API would call it.

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/client"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
)

// newUser makes an account on env and a client calling with its key;
// opts come after the test's defaults.
func newUser(t *testing.T, env *enginetest.Env, name string, opts ...client.Option) *client.Client {
	t.Helper()
	key := env.APIKey(t, env.CreateUser(t, name, auth.RoleUser))
	return client.New(env.URL, key, opts...)
}

// testContext bounds a test's calls, so that a hung engine fails the
// test instead of stalling the run.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// counter is a transport counting the requests the client sends, so a
// test can tell a retried call from one sent once.
type counter struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func countingClient() (*counter, *http.Client) {
	c := &counter{next: http.DefaultTransport.(*http.Transport).Clone()}
	return c, &http.Client{Transport: c}
}

func ids(list []client.Session) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}

// TestSessions: a session is made with the fields asked for, read back,
// listed for its owner only (and by label), and deleted; warmup starts
// sessions at once.
func TestSessions(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	alice := newUser(t, env, "alice")
	bob := newUser(t, env, "bob")
	ctx := testContext(t)

	opts := client.SessionOptions{
		Name:        "report-builder",
		Limits:      &client.Limits{CPUCount: 1, MemoryMiB: 256, Pids: 128},
		IdleTimeout: 2 * time.Minute,
		Labels:      map[string]string{"team": "data"},
	}
	s, err := alice.CreateSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.ID, "ses_") || s.Name != opts.Name || s.IdleTimeout != opts.IdleTimeout ||
		s.Labels["team"] != "data" || s.Limits != *opts.Limits || s.Network != client.NetworkNone || s.CreatedAt.IsZero() {
		t.Errorf("created %+v, want the fields of %+v, network none and a creation time", s, opts)
	}
	if s.Status != client.StatusNone {
		t.Errorf("a session made without start has status %q, want %q", s.Status, client.StatusNone)
	}
	got, err := alice.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The database keeps milliseconds; creation answers with more.
	if got.ID != s.ID || got.Name != s.Name || !got.CreatedAt.Equal(s.CreatedAt.Truncate(time.Millisecond)) {
		t.Errorf("GET gave %+v, want %+v", got, s)
	}

	other, err := alice.CreateSession(ctx, client.SessionOptions{Labels: map[string]string{"team": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		c      *client.Client
		labels []string
		want   []string
	}{
		{"all of alice's, newest first", alice, nil, []string{other.ID, s.ID}},
		{"by label", alice, []string{"team=data"}, []string{s.ID}},
		{"no match", alice, []string{"team=data", "x=y"}, []string{}},
		{"bob sees none of alice's", bob, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := tc.c.Sessions(ctx, tc.labels...)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(list); !slices.Equal(got, tc.want) {
				t.Errorf("Sessions(%q) = %q, want %q", tc.labels, got, tc.want)
			}
		})
	}

	warm, err := alice.Warmup(ctx, 2, client.SessionOptions{Labels: map[string]string{"pool": "warm"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warm) != 2 {
		t.Fatalf("warmup of 2 gave %d sessions", len(warm))
	}
	for _, w := range warm {
		if w.Status != client.StatusRunning || w.Labels["pool"] != "warm" {
			t.Errorf("warmed %+v, want running with label pool=warm", w)
		}
	}

	if err := alice.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Session(ctx, s.ID); !errors.Is(err, client.ErrGone) && !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GET of a deleted session: %v, want ErrGone or ErrNotFound", err)
	}
	list, err := alice.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids(list), s.ID) {
		t.Errorf("the deleted session %s is still listed: %q", s.ID, ids(list))
	}
}

// TestExecuteOnce: a call in a temporary session gives its result and
// leaves no session behind.
func TestExecuteOnce(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	c := client.New(env.URL, env.APIKey(t, aliceID))
	ctx := testContext(t)

	res, err := c.ExecuteOnce(ctx, "shell:exec", map[string]any{"command": "echo once"}, client.SessionOptions{Labels: map[string]string{"kind": "once"}})
	if err != nil {
		t.Fatal(err)
	}
	var out client.ShellResult
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if res.IsError || out.Stdout != "once\n" {
		t.Errorf("ExecuteOnce gave %+v, output %+v, want stdout once", res, out)
	}
	// The API never lists temporary sessions, so the engine's own
	// records are read: none of alice's is left.
	left, err := env.Engine.Services.Sessions.List(ctx, aliceID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the temporary session is still recorded after the call: %+v", left)
	}
}

// TestExecuteStream: output reaches the callback while the command still
// runs; stdout and stderr come apart, and the result follows.
func TestExecuteStream(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	c := newUser(t, env, "alice", client.WithRetry(1, time.Millisecond))
	ctx := testContext(t)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("whole", func(t *testing.T) {
		var stdout, stderr strings.Builder
		res, err := c.ExecuteStream(ctx, s.ID, "shell:exec", map[string]any{"command": "echo out; echo err >&2; echo more"},
			func(stream, text string) {
				switch stream {
				case "stdout":
					stdout.WriteString(text)
				case "stderr":
					stderr.WriteString(text)
				default:
					t.Errorf("output of stream %q (%q)", stream, text)
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		var out client.ShellResult
		if err := res.Decode(&out); err != nil {
			t.Fatal(err)
		}
		if stdout.String() != "out\nmore\n" || stderr.String() != "err\n" {
			t.Errorf("streamed stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), "out\nmore\n", "err\n")
		}
		if res.IsError || out.Stdout != stdout.String() || out.Stderr != stderr.String() {
			t.Errorf("result %+v, output %+v; want what was streamed", res, out)
		}
	})

	// The callback cancels the call when the first line comes: a stream
	// sent in one piece at the end would also bring "late" and the result.
	t.Run("before the end", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var seen []string
		_, err := c.ExecuteStream(ctx, s.ID, "shell:exec", map[string]any{"command": "echo early; sleep 5; echo late", "timeoutSeconds": 30},
			func(stream, text string) {
				seen = append(seen, text)
				if strings.Contains(text, "early") {
					cancel()
				}
			})
		if !errors.Is(err, context.Canceled) || !slices.Equal(seen, []string{"early\n"}) {
			t.Errorf("canceled at the first output: got %v, output %q; want context.Canceled after %q", err, seen, "early\n")
		}
	})
}

// TestFiles: an upload downloads as it went; a directory downloads as a
// ZIP of its files; file:list sees them.
func TestFiles(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	c := newUser(t, env, "alice")
	ctx := testContext(t)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}

	data := bytes.Repeat([]byte("a,b,c\n1,2,3\n"), 10000)
	up, err := c.Upload(ctx, s.ID, "/workspace/data/in.csv", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if up.Size != int64(len(data)) || up.Path != "/workspace/data/in.csv" {
		t.Errorf("upload answered %+v, want path /workspace/data/in.csv and size %d", up, len(data))
	}
	// A reader that cannot be rewound is sent once, as well.
	if _, err := c.Upload(ctx, s.ID, "data/notes.txt", io.MultiReader(strings.NewReader("no"), strings.NewReader("tes\n"))); err != nil {
		t.Fatal(err)
	}

	var got bytes.Buffer
	if _, err := c.Download(ctx, s.ID, "/workspace/data/in.csv", &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Errorf("downloaded %d bytes, want the %d uploaded", got.Len(), len(data))
	}

	var archive bytes.Buffer
	ctype, err := c.Download(ctx, s.ID, "/workspace/data", &archive)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "application/zip" {
		t.Errorf("a directory downloads as %q, want application/zip", ctype)
	}
	zr, err := zip.NewReader(bytes.NewReader(archive.Bytes()), int64(archive.Len()))
	if err != nil {
		t.Fatalf("the directory's download is not a ZIP: %v", err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = string(b)
	}
	// The archive holds the directory itself, as the chats' downloads do.
	if len(files) != 3 || files["data/in.csv"] != string(data) || files["data/notes.txt"] != "notes\n" || files["data/"] != "" {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		t.Errorf("the ZIP holds %q, want data/, data/in.csv and data/notes.txt with their contents", names)
	}

	entries, err := c.ListFiles(ctx, s.ID, "/workspace/data")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"in.csv", "notes.txt"}) {
		t.Errorf("file:list of the directory = %q, want in.csv and notes.txt", names)
	}
}

// TestErrors: the API's refusals arrive as *Error of their kind.
func TestErrors(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	alice := newUser(t, env, "alice")
	bob := newUser(t, env, "bob")
	stranger := client.New(env.URL, "fbk_not-a-key")
	ctx := testContext(t)
	s, err := alice.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		call   func() error
		want   error
		status int
	}{
		{"no such tool", func() error {
			_, err := alice.Execute(ctx, s.ID, "shell:nope", map[string]any{"command": "true"})
			return err
		}, client.ErrNoSuchTool, http.StatusBadRequest},
		{"bad params", func() error {
			_, err := alice.Execute(ctx, s.ID, "shell:exec", map[string]any{"command": 5})
			return err
		}, client.ErrBadParams, http.StatusBadRequest},
		{"bad session options", func() error {
			_, err := alice.CreateSession(ctx, client.SessionOptions{IdleTimeout: time.Second})
			return err
		}, client.ErrBadRequest, http.StatusBadRequest},
		{"no such session", func() error {
			_, err := alice.Exec(ctx, "ses_missing", "true")
			return err
		}, client.ErrNotFound, http.StatusNotFound},
		{"another user's session", func() error {
			_, err := bob.Exec(ctx, s.ID, "true")
			return err
		}, client.ErrNotFound, http.StatusNotFound},
		{"another user's session's file", func() error {
			_, err := bob.Download(ctx, s.ID, "/workspace", io.Discard)
			return err
		}, client.ErrNotFound, http.StatusNotFound},
		{"no such file", func() error {
			_, err := alice.Download(ctx, s.ID, "/workspace/missing.txt", io.Discard)
			return err
		}, client.ErrNotFound, http.StatusNotFound},
		{"a bad key", func() error {
			_, err := stranger.Sessions(ctx)
			return err
		}, client.ErrUnauthorized, http.StatusUnauthorized},
		{"snapshots on an engine without checkpoints", func() error {
			_, err := alice.Snapshots(ctx, s.ID)
			return err
		}, client.ErrUnsupported, http.StatusNotImplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var apiErr *client.Error
			if !errors.Is(err, tc.want) || !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Message == "" {
				t.Errorf("got %v (%#v), want %v, status %d, with a message", err, apiErr, tc.want, tc.status)
			}
		})
	}
}

// TestCap: with a cap of one running sandbox on the server, a second
// session's first call is refused as rate limited, at once rather than
// after a minute of retries. (At a user's own cap, the user's idle
// sandbox would be stopped to make room instead.)
func TestCap(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CAP_SANDBOXES": "1"}})
	n, hc := countingClient()
	c := newUser(t, env, "alice", client.WithHTTPClient(hc))
	ctx := testContext(t)

	first, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, first.ID, "true"); err != nil {
		t.Fatal(err)
	}
	second, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := n.n.Load()
	_, err = c.Exec(ctx, second.ID, "true")
	var apiErr *client.Error
	if !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &apiErr) || apiErr.RetryAfter <= 0 {
		t.Fatalf("a second running sandbox over the cap: %v, want ErrRateLimited with a Retry-After", err)
	}
	if sent := n.n.Load() - before; sent != 1 {
		t.Errorf("the refused call was sent %d times, want once (Retry-After %s is over the longest backoff)", sent, apiErr.RetryAfter)
	}

	// Streamed, the refusal comes after the stream began: its error event.
	_, err = c.ExecuteStream(ctx, second.ID, "shell:exec", map[string]any{"command": "true"}, nil)
	if !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
		t.Errorf("a streamed call over the cap: %v, want ErrRateLimited, status 429", err)
	}
}

// TestTools: the listing has the built-in tools with their schemas.
func TestTools(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	c := newUser(t, env, "alice")
	tools, err := c.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]client.Tool{}
	for _, tool := range tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"shell:exec", "file:read", "file:write", "file:list"} {
		tool, ok := byName[name]
		if !ok {
			t.Errorf("no tool %s among %d listed", name, len(tools))
			continue
		}
		if !strings.Contains(string(tool.InputSchema), `"properties"`) || tool.Description == "" {
			t.Errorf("%s is listed without a description or an input schema: %+v", name, tool)
		}
	}
	if !byName["file:read"].ReadOnly || byName["shell:exec"].ReadOnly {
		t.Errorf("file:read read-only %v, shell:exec read-only %v; want true, false", byName["file:read"].ReadOnly, byName["shell:exec"].ReadOnly)
	}
}

// TestCommandFailure: a command exiting 3 is a result, not an error, and
// it is not run again.
func TestCommandFailure(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	n, hc := countingClient()
	c := newUser(t, env, "alice", client.WithHTTPClient(hc), client.WithRetry(5, time.Millisecond))
	ctx := testContext(t)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}

	before := n.n.Load()
	res, err := c.Execute(ctx, s.ID, "shell:exec", map[string]any{"command": "echo ran >> runs.txt; echo failing >&2; exit 3"})
	if err != nil {
		t.Fatalf("a failing command: %v, want a result", err)
	}
	if sent := n.n.Load() - before; sent != 1 {
		t.Errorf("the failing command was sent %d times, want once", sent)
	}
	var out client.ShellResult
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || out.ExitCode != 3 || out.Stderr != "failing\n" {
		t.Errorf("result %+v, output %+v; want isError, exit code 3, stderr failing", res, out)
	}
	runs, err := c.Exec(ctx, s.ID, "cat runs.txt")
	if err != nil {
		t.Fatal(err)
	}
	if runs.Stdout != "ran\n" {
		t.Errorf("the command ran %d times, want once", strings.Count(runs.Stdout, "ran"))
	}
}

// TestRetryAcrossRestart: calls made while the engine is down (a
// connection refused) are retried until it is up again on the same
// address, and find the session and its files there.
func TestRetryAcrossRestart(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	refused := make(chan struct{})
	var once sync.Once
	tr := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err != nil {
			once.Do(func() { close(refused) })
		}
		return resp, err
	})}
	c := newUser(t, env, "alice", client.WithHTTPClient(hc), client.WithRetry(100, 50*time.Millisecond), client.WithMaxBackoff(500*time.Millisecond))
	ctx := testContext(t)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, s.ID, "echo before > kept.txt"); err != nil {
		t.Fatal(err)
	}

	start := env.Stop(t)
	// The engine closed the idle connection of the first call; the
	// transport learns of it from its reader a moment later. A POST sent
	// on it in that moment is reset after it was written, which no client
	// can tell from one the engine received: the call here is one made
	// while the engine is down, on a new connection.
	tr.CloseIdleConnections()
	type answer struct {
		exec *client.ShellResult
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := c.Exec(ctx, s.ID, "cat kept.txt") // a POST: retried only because it was refused
		done <- answer{res, err}
	}()
	select {
	case <-refused:
	case a := <-done:
		t.Fatalf("a call while the engine is down returned before being refused: %+v", a)
	}
	start(t)

	a := <-done
	if a.err != nil {
		t.Fatalf("the call made during the restart: %v", a.err)
	}
	if a.exec.Stdout != "before\n" {
		t.Errorf("after the restart the session's file reads %q, want %q", a.exec.Stdout, "before\n")
	}
	if _, err := c.Session(ctx, s.ID); err != nil {
		t.Errorf("GET the session after the restart: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSnapshots: on an engine with checkpoints, a session's sandbox is
// kept as a snapshot, and a session made from it has its files and shell
// state while the first goes on; snapshots are listed, deleted, and
// neither seen nor used by another user. Warmup and ExecuteOnce refuse
// FromSnapshot without calling the engine.
func TestSnapshots(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CHECKPOINTS": "on", "FLOWBOX_CHECKPOINT_POOL": checkpointtest.Pool(t)}})
	n, hc := countingClient()
	alice := newUser(t, env, "alice", client.WithHTTPClient(hc))
	bob := newUser(t, env, "bob")
	ctx := testContext(t)

	first, err := alice.CreateSession(ctx, client.SessionOptions{Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Snapshot(ctx, first.ID, "early"); !errors.Is(err, client.ErrNotStarted) {
		t.Errorf("a snapshot before any call: %v, want ErrNotStarted", err)
	}
	if _, err := alice.Exec(ctx, first.ID, "echo one > /workspace/f.txt && mkdir -p /workspace/d && cd /workspace/d && export X=1"); err != nil {
		t.Fatal(err)
	}
	snap, err := alice.Snapshot(ctx, first.ID, "a")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Session != first.ID || snap.Name != "a" || snap.Created.IsZero() {
		t.Errorf("the snapshot: %+v, want session %s, name a and a time", snap, first.ID)
	}
	if _, err := alice.Snapshot(ctx, first.ID, "a"); !errors.Is(err, client.ErrExists) {
		t.Errorf("a second snapshot a: %v, want ErrExists", err)
	}
	if _, err := alice.Exec(ctx, first.ID, "echo two > /workspace/f.txt && cd / && export X=2"); err != nil {
		t.Fatal(err)
	}

	from := &client.SnapshotRef{Session: first.ID, Snapshot: "a"}
	second, err := alice.CreateSession(ctx, client.SessionOptions{Name: "second", FromSnapshot: from})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := alice.Exec(ctx, second.ID, `cat /workspace/f.txt; echo "$(pwd) $X"`); err != nil || got.Stdout != "one\n/workspace/d 1\n" {
		t.Errorf("the session from the snapshot: %+v, %v; want one, /workspace/d and X=1", got, err)
	}
	if got, err := alice.Exec(ctx, first.ID, "cat /workspace/f.txt"); err != nil || got.Stdout != "two\n" {
		t.Errorf("the first session after the second started: %+v, %v; want two", got, err)
	}

	list, err := alice.Snapshots(ctx, first.ID)
	if err != nil || len(list) != 1 || list[0].Name != "a" {
		t.Errorf("Snapshots = %+v, %v; want a", list, err)
	}
	if _, err := bob.Snapshots(ctx, first.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("bob's listing of alice's snapshots: %v, want ErrNotFound", err)
	}
	if _, err := bob.CreateSession(ctx, client.SessionOptions{FromSnapshot: from}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("bob's session from alice's snapshot: %v, want ErrNotFound", err)
	}

	sent := n.n.Load()
	if _, err := alice.Warmup(ctx, 1, client.SessionOptions{FromSnapshot: from}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("Warmup with FromSnapshot: %v, want ErrBadRequest", err)
	}
	if _, err := alice.ExecuteOnce(ctx, "shell:exec", map[string]any{"command": "true"}, client.SessionOptions{FromSnapshot: from}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("ExecuteOnce with FromSnapshot: %v, want ErrBadRequest", err)
	}
	if got := n.n.Load(); got != sent {
		t.Errorf("the refused calls sent %d requests, want none", got-sent)
	}

	if err := alice.DeleteSnapshot(ctx, first.ID, "a"); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteSnapshot(ctx, first.ID, "a"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if list, err := alice.Snapshots(ctx, first.ID); err != nil || len(list) != 0 {
		t.Errorf("Snapshots after the delete = %+v, %v; want none", list, err)
	}
	if _, err := alice.CreateSession(ctx, client.SessionOptions{FromSnapshot: from}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a session from the deleted snapshot: %v, want ErrNotFound", err)
	}
	// The session from it keeps its files.
	if got, err := alice.Exec(ctx, second.ID, "cat /workspace/f.txt"); err != nil || got.Stdout != "one\n" {
		t.Errorf("the session from the deleted snapshot: %+v, %v; want one", got, err)
	}
}
