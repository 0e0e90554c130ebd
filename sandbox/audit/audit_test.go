package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func newStore(t testing.TB) *audit.Store {
	t.Helper()
	s, err := audit.New(context.Background(), mongotest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuditQuery: every filter selects what it names, pages of 7 over 40
// records return each once, newest first, and records inserted between
// two pages neither repeat nor push older ones out.
func TestAuditQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var recs []audit.Record
	for i := range 40 {
		st := audit.StatusSuccess
		if i%4 == 0 {
			st = audit.StatusFailed
		}
		recs = append(recs, audit.Record{
			// Pairs share a millisecond: the cursor's _id breaks ties.
			Time: t0.Add(time.Duration(i/2) * time.Second), Kind: audit.KindCommand, Status: st, Decision: audit.Allowed,
			AppID: fmt.Sprintf("app%d", i%2), UserID: fmt.Sprintf("u%d", i%3), ChatID: fmt.Sprintf("c%d", i%5), Command: fmt.Sprintf("echo %d", i),
		})
	}
	recs[5].Decision, recs[5].Status, recs[5].Rule = audit.Refused, audit.StatusRefused, "no-rm"
	recs[6].Kind = audit.KindFile
	if err := s.Insert(ctx, recs...); err != nil {
		t.Fatal(err)
	}

	count := func(f audit.Filter) int {
		t.Helper()
		p, err := s.Query(ctx, f, "", audit.MaxLimit)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Records)
	}
	tests := []struct {
		name string
		f    audit.Filter
		want int
	}{
		{"all", audit.Filter{}, 40},
		{"app", audit.Filter{AppID: "app1"}, 20},
		{"user", audit.Filter{UserID: "u0"}, 14},
		{"chat", audit.Filter{ChatID: "c3"}, 8},
		{"status", audit.Filter{Status: audit.StatusFailed}, 10},
		{"decision", audit.Filter{Decision: audit.Refused}, 1},
		{"kind", audit.Filter{Kind: audit.KindFile}, 1},
		{"since", audit.Filter{Since: t0.Add(10 * time.Second)}, 20},
		{"until", audit.Filter{Until: t0.Add(10 * time.Second)}, 20},
		{"range and app", audit.Filter{Since: t0.Add(5 * time.Second), Until: t0.Add(15 * time.Second), AppID: "app0"}, 10},
	}
	for _, tc := range tests {
		if got := count(tc.f); got != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, got, tc.want)
		}
	}

	seen := map[string]bool{}
	var last audit.Record
	cursor, pages := "", 0
	for {
		p, err := s.Query(ctx, audit.Filter{}, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if pages == 2 {
			// Newer records, and one as old as the first page's last.
			if err := s.Insert(ctx, audit.Record{Time: t0.Add(time.Hour), Command: "new"}, audit.Record{Time: t0.Add(time.Hour), Command: "new"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range p.Records {
			if seen[r.ID.Hex()] {
				t.Fatalf("page %d repeats %s", pages, r.Command)
			}
			seen[r.ID.Hex()] = true
			if last.Command != "" && (r.Time.After(last.Time) || r.Time.Equal(last.Time) && r.ID.Hex() > last.ID.Hex()) {
				t.Fatalf("page %d: %s (%s) comes after %s (%s): not newest first", pages, r.Command, r.Time, last.Command, last.Time)
			}
			last = r
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(seen) != 40 || pages != 6 {
		t.Fatalf("the pages held %d records in %d pages, want the 40 there were at the start in 6 pages", len(seen), pages)
	}
	if _, err := s.Query(ctx, audit.Filter{}, "not a cursor", 7); !errors.Is(err, audit.ErrBadCursor) {
		t.Errorf("a bad cursor: %v, want ErrBadCursor", err)
	}
}

// TestAuditEachAndPrune: Each streams every matching record; Prune
// deletes those older than the cut and nothing else.
func TestAuditEachAndPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC()
	var recs []audit.Record
	for i := range 1200 {
		recs = append(recs, audit.Record{Time: now.Add(-time.Duration(i) * time.Hour), AppID: "a", Command: fmt.Sprint(i)})
	}
	if err := s.Insert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.Each(ctx, audit.Filter{AppID: "a"}, func(audit.Record) error { n++; return nil }); err != nil || n != 1200 {
		t.Fatalf("Each saw %d records (%v), want 1200", n, err)
	}
	pruned, err := s.Prune(ctx, now.Add(-100*time.Hour+time.Minute))
	if err != nil || pruned != 1100 {
		t.Fatalf("Prune deleted %d (%v), want 1100", pruned, err)
	}
	p, err := s.Query(ctx, audit.Filter{}, "", audit.MaxLimit)
	if err != nil || len(p.Records) != 100 || p.Records[99].Command != "99" {
		t.Fatalf("after the prune: %d records (%v), want the 100 newest", len(p.Records), err)
	}
}

// failingStore fails its first fails inserts, then keeps what it gets.
type failingStore struct {
	mu      sync.Mutex
	fails   int
	kept    []audit.Record
	inserts int // the inserts that succeeded
	// block, when set, holds every insert until closed; entered hears of
	// each insert that starts.
	block, entered chan struct{}
}

func (f *failingStore) Insert(ctx context.Context, recs ...audit.Record) error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("database down")
	}
	f.kept = append(f.kept, recs...)
	f.inserts++
	return nil
}

func (f *failingStore) counts() (records, inserts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.kept), f.inserts
}

// TestAuditWriter: records are written in the background and flushed on
// Close; a full buffer writes on the caller's path and is counted; a
// record that cannot be written is counted and logged, not lost silently.
func TestAuditWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("full buffer", func(t *testing.T) {
		st := &failingStore{block: make(chan struct{}), entered: make(chan struct{}, 16)}
		m := audit.NewMetrics()
		w := audit.NewWriter(audit.WriterConfig{Store: st, Buffer: 2, Batch: 1, Metrics: m, Logger: slog.New(slog.DiscardHandler)})
		// The writer takes the first record and waits in its insert; two
		// more fill the buffer; the fourth is written by its caller.
		w.Write(ctx, audit.Record{Command: "1"})
		<-st.entered
		w.Write(ctx, audit.Record{Command: "2"})
		w.Write(ctx, audit.Record{Command: "3"})
		done := make(chan struct{})
		go func() { w.Write(ctx, audit.Record{Command: "4"}); close(done) }()
		<-st.entered // the caller's own insert
		select {
		case <-done:
			t.Fatal("the fourth Write returned before its record was written")
		default:
		}
		close(st.block)
		<-done
		w.Close()
		if got := m.BufferFull(); got != 1 {
			t.Errorf("buffer full counted %v times, want 1", got)
		}
		if len(st.kept) != 4 {
			t.Errorf("%d records kept, want all 4", len(st.kept))
		}
	})

	t.Run("linger", func(t *testing.T) {
		// Records that come within the linger go in one insert; a Flush
		// ends the wait at once, however long the linger.
		st := &failingStore{}
		w := audit.NewWriter(audit.WriterConfig{Store: st, Linger: time.Hour})
		for i := range 5 {
			w.Write(ctx, audit.Record{Command: fmt.Sprint(i)})
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := w.Flush(fctx); err != nil {
			t.Fatalf("Flush did not end the linger: %v", err)
		}
		if recs, inserts := st.counts(); recs != 5 || inserts != 1 {
			t.Errorf("%d records in %d inserts, want 5 in 1", recs, inserts)
		}
		w.Close()

		// Without a Flush, a record is written when the linger ends.
		st = &failingStore{}
		w = audit.NewWriter(audit.WriterConfig{Store: st, Linger: 20 * time.Millisecond})
		defer w.Close()
		w.Write(ctx, audit.Record{Command: "alone"})
		deadline := time.Now().Add(10 * time.Second)
		for recs, _ := st.counts(); recs != 1; recs, _ = st.counts() {
			if time.Now().After(deadline) {
				t.Fatal("a lone record was not written after the linger")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	t.Run("failures", func(t *testing.T) {
		st := &failingStore{fails: 2}
		m := audit.NewMetrics()
		var logs bytes.Buffer
		w := audit.NewWriter(audit.WriterConfig{Store: st, Metrics: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		w.Write(ctx, audit.Record{Command: "lost"})
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		w.Write(ctx, audit.Record{Command: "kept"})
		w.Close()
		if got := m.WriteFailures(); got != 1 {
			t.Errorf("write failures = %v, want 1", got)
		}
		if !bytes.Contains(logs.Bytes(), []byte("audit record not written")) || !bytes.Contains(logs.Bytes(), []byte("command=lost")) {
			t.Errorf("the failure is not logged with its record: %s", logs.String())
		}
		if len(st.kept) != 1 || st.kept[0].Command != "kept" {
			t.Errorf("kept %+v, want the second record", st.kept)
		}
	})
}

// recorder keeps records in memory.
type recorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (r *recorder) Write(_ context.Context, rec audit.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

// TestAuditClassify: what the chain below returned becomes the record's
// decision, rule and status, and the command's metric; the command is
// redacted, the result passed on untouched.
func TestAuditClassify(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		res      sandbox.ExecResult
		err      error
		status   audit.Status
		decision audit.Decision
		rule     string
		metric   string
	}{
		{"success", context.Background(), sandbox.ExecResult{Stdout: "hi\n"}, nil, audit.StatusSuccess, audit.Allowed, "", audit.ResultSuccess},
		{"failed", context.Background(), sandbox.ExecResult{ExitCode: 2}, nil, audit.StatusFailed, audit.Allowed, "", audit.ResultFailed},
		{"timed out", context.Background(), sandbox.ExecResult{ExitCode: 124, TimedOut: true}, nil, audit.StatusTimedOut, audit.Allowed, "", audit.ResultTimedOut},
		{"policy", context.Background(), sandbox.ExecResult{ExitCode: -1}, fmt.Errorf("x: %w", &sandbox.RefusedError{Rule: "no-curl", Justification: "no network"}), audit.StatusRefused, audit.Refused, "no-curl", audit.ResultRefused},
		{"cap", context.Background(), sandbox.ExecResult{ExitCode: -1}, fmt.Errorf("x: %w", &sandbox.LimitError{Cap: sandbox.CapUser, Limit: 1, Use: 1}), audit.StatusLimited, audit.Refused, "cap:" + sandbox.CapUser, audit.ResultRefused},
		{"unavailable", context.Background(), sandbox.ExecResult{ExitCode: -1}, fmt.Errorf("x: %w", sandbox.ErrUnavailable), audit.StatusUnavailable, audit.Allowed, "", audit.ResultError},
		{"deleted", context.Background(), sandbox.ExecResult{ExitCode: -1}, fmt.Errorf("x: %w", sandbox.ErrDeleted), audit.StatusDeleted, audit.Allowed, "", audit.ResultError},
		{"client gone", cancelled, sandbox.ExecResult{}, fmt.Errorf("exec: %w", context.Canceled), audit.StatusClientGone, audit.Allowed, "", audit.ResultError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			m := audit.NewMetrics()
			mw := audit.Middleware(audit.Config{Records: rec, Metrics: m, Instance: "test", Redact: func(s string) string { return "[r]" + s }})
			exec := mw.Exec(func(context.Context, *sandbox.Call) (sandbox.ExecResult, error) { return tc.res, tc.err })
			call := &sandbox.Call{Scope: sandbox.Scope{AppID: "a", UserID: "u", ChatID: "c"}, SandboxID: "s",
				Request: sandbox.ExecRequest{Command: "echo hi", Actor: sandbox.Actor{UserID: "u", Kind: sandbox.ActorAgent, ToolCallID: "call_1", Via: "key1"}}}
			res, err := exec(tc.ctx, call)
			if res != tc.res || err != tc.err {
				t.Fatalf("the middleware changed the result: %+v %v", res, err)
			}
			if len(rec.recs) != 1 {
				t.Fatalf("%d records, want 1", len(rec.recs))
			}
			r := rec.recs[0]
			if r.Status != tc.status || r.Decision != tc.decision || r.Rule != tc.rule {
				t.Errorf("record %s/%s/%q, want %s/%s/%q", r.Status, r.Decision, r.Rule, tc.status, tc.decision, tc.rule)
			}
			if r.Command != "[r]echo hi" || r.Tool != "sandbox_shell" || r.ActorID != "u" || r.Via != "key1" || r.ToolCallID != "call_1" ||
				r.AppID != "a" || r.ChatID != "c" || r.SandboxID != "s" || r.Instance != "test" || r.ExitCode != tc.res.ExitCode ||
				r.StdoutBytes != int64(len(tc.res.Stdout)) {
				t.Errorf("record %+v does not say who, where and what", r)
			}
			if got := m.Commands(tc.metric); got != 1 {
				t.Errorf("commands{result=%s} = %v, want 1", tc.metric, got)
			}
		})
	}
}

// BenchmarkAuditInsert is one record written on the command's path, one
// insert each, on the test database (the embedded FerretDB unless
// FLOWBOX_TEST_MONGODB_URI names another). BenchmarkAuditWriter is what a
// command pays with the Writer when the database keeps up: queueing the
// record. BenchmarkAuditWriterSustained writes records as fast as it can
// through the default buffer, so that once it is full the callers wait
// for the batched inserts: its time per record is the most records a
// second the writer sustains.
func BenchmarkAuditInsert(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	r := sampleRecord()
	for b.Loop() {
		r.ID = [12]byte{}
		if err := s.Insert(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuditWriter(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	w := audit.NewWriter(audit.WriterConfig{Store: s})
	r := sampleRecord()
	n := 0
	for b.Loop() {
		// Let the buffer drain out of the timing every 1000 records: the
		// cost of a full buffer is the sustained benchmark's.
		if n++; n%1000 == 0 {
			b.StopTimer()
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		w.Write(ctx, r)
	}
	b.StopTimer()
	w.Close()
}

func BenchmarkAuditWriterSustained(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	w := audit.NewWriter(audit.WriterConfig{Store: s, Logger: slog.New(slog.DiscardHandler)})
	r := sampleRecord()
	for b.Loop() {
		w.Write(ctx, r)
	}
	w.Close()
}

func sampleRecord() audit.Record {
	return audit.Record{Time: time.Now(), Instance: "bench:1", Kind: audit.KindCommand, ActorID: "u:alice", ActorKind: "agent",
		ToolCallID: "call_1", AppID: "app", ChatID: "chat", UserID: "u:alice", SandboxID: "0123456789abcdef", Tool: "sandbox_shell",
		Command: "ls -la /workspace && cat notes.txt", Decision: audit.Allowed, Status: audit.StatusSuccess, StdoutBytes: 1234}
}
