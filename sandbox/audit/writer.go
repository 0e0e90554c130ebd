package audit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flowbox/flowbox/internal/batchqueue"
)

// Inserter writes records (Store).
type Inserter interface {
	Insert(ctx context.Context, recs ...Record) error
}

// WriterConfig configures a Writer. Zero values have the documented
// defaults.
type WriterConfig struct {
	// Store receives the records (required).
	Store Inserter
	// Buffer bounds the records waiting to be written. Default 4096.
	Buffer int
	// Batch bounds the records of one insert. Default 256.
	Batch int
	// WriteTimeout bounds one insert. Default 10 seconds.
	WriteTimeout time.Duration
	// Linger is how long the writer waits, after the first record of a
	// batch, for more to write in the same insert. An insert costs the
	// database about as much for one record as for dozens, so waiting
	// a little keeps that work off the commands' cores while they run.
	// A Flush ends the wait. Default 100 ms; negative: no wait.
	Linger time.Duration
	// Metrics counts failures; nil: NewMetrics(), registered nowhere.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Writer writes records in the background, in batches, so that a command
// does not wait for the database: Write only queues the record. When the
// buffer is full (the database is slower than the commands, or down), the
// record is written on the caller's path instead, bounded by
// WriteTimeout, and counted (flowbox_audit_buffer_full_total): commands
// slow down rather than records being lost. A record that cannot be
// written is counted (flowbox_audit_write_failures_total) and logged with
// what it was; it is never dropped silently. Close writes what is queued.
type Writer struct {
	cfg WriterConfig
	log *slog.Logger
	q   *batchqueue.Queue[Record]
}

// NewWriter starts a writer; Close stops it.
func NewWriter(cfg WriterConfig) *Writer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 4096
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Linger == 0 {
		cfg.Linger = 100 * time.Millisecond
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Writer{cfg: cfg, log: cfg.Logger.With("component", "audit")}
	w.q = batchqueue.New(batchqueue.Config{Size: cfg.Buffer, Batch: cfg.Batch, Linger: cfg.Linger},
		func(recs []Record) { w.write(context.Background(), recs) })
	return w
}

// Write queues r, or writes it at once when the buffer is full or the
// writer closed. It never fails the caller; ctx's values are kept, its
// end is not (a client that leaves does not lose its record).
func (w *Writer) Write(ctx context.Context, r Record) {
	err := w.q.Offer(r)
	if err == nil {
		return
	}
	if errors.Is(err, batchqueue.ErrFull) {
		w.cfg.Metrics.bufferFull.Inc()
	}
	w.write(context.WithoutCancel(ctx), []Record{r})
}

// Flush returns once every record queued before it is written (or failed
// to be), or when ctx ends.
func (w *Writer) Flush(ctx context.Context) error { return w.q.Flush(ctx) }

// Close writes what is queued and stops the writer. Later Writes are
// written at once.
func (w *Writer) Close() { w.q.Close() }

// write inserts recs, trying twice; what fails is counted and logged.
func (w *Writer) write(ctx context.Context, recs []Record) {
	if len(recs) == 0 {
		return
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		wctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
		err = w.cfg.Store.Insert(wctx, recs...)
		cancel()
		if err == nil {
			return
		}
	}
	w.cfg.Metrics.writeFailures.Add(float64(len(recs)))
	for _, r := range recs {
		w.log.Error("audit record not written", "err", err, "time", r.Time, "kind", r.Kind, "appId", r.AppID, "chatId", r.ChatID,
			"userId", r.UserID, "actorId", r.ActorID, "tool", r.Tool, "command", r.Command, "op", r.Op, "path", r.Path,
			"status", r.Status, "exitCode", r.ExitCode, "rule", r.Rule)
	}
}
