// Package batchqueue hands values to one goroutine that handles them in
// order and in batches, off the caller's path: the audit writer's records
// (sandbox/audit) and the alerts queued as tasks (workers) go through it.
//
// A Queue never blocks its callers: Offer either queues a value or says
// why it did not (ErrFull, ErrClosed), and the caller decides what to do
// with it instead (write it on its own path, count it, log it). Flush
// waits until everything offered before it is handled; Close handles what
// waits and stops.
package batchqueue

import (
	"context"
	"errors"
	"sync"
	"time"
)

var (
	// ErrFull: Size values wait already.
	ErrFull = errors.New("queue full")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("queue closed")
)

// Config shapes a Queue.
type Config struct {
	// Size bounds the values waiting (at least 1).
	Size int
	// Batch bounds the values of one call of the handler (at least 1).
	Batch int
	// Linger is how long the queue waits, after the first value of a
	// batch, for more to hand over in the same call; a Flush or Close
	// ends the wait. Zero or negative: no wait, a batch is what waits
	// already.
	Linger time.Duration
}

// Queue is a running queue of values of type T.
type Queue[T any] struct {
	cfg    Config
	handle func([]T)
	ch     chan entry[T]
	done   chan struct{}

	mu     sync.RWMutex // guards closed against a send on a closed ch
	closed bool
}

// entry is a value, or a flush marker closed once everything queued
// before it is handled.
type entry[T any] struct {
	v       T
	flushed chan struct{}
}

// New starts a queue whose goroutine calls handle with each batch, in
// the order the values were offered; Close stops it. handle must not
// keep the slice after it returns, nor call the queue's methods.
func New[T any](cfg Config, handle func(batch []T)) *Queue[T] {
	cfg.Size = max(cfg.Size, 1)
	cfg.Batch = max(cfg.Batch, 1)
	q := &Queue[T]{cfg: cfg, handle: handle, ch: make(chan entry[T], cfg.Size), done: make(chan struct{})}
	go q.run()
	return q
}

// Offer queues v without waiting: ErrFull when Size values wait,
// ErrClosed after Close.
func (q *Queue[T]) Offer(v T) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	select {
	case q.ch <- entry[T]{v: v}:
		return nil
	default:
		return ErrFull
	}
}

// Flush returns once every value offered before it is handled, or when
// ctx ends; at once after Close, which handles everything itself.
func (q *Queue[T]) Flush(ctx context.Context) error {
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return nil
	}
	marker := entry[T]{flushed: make(chan struct{})}
	select {
	case q.ch <- marker:
	case <-ctx.Done():
		q.mu.RUnlock()
		return ctx.Err()
	}
	q.mu.RUnlock()
	select {
	case <-marker.flushed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close handles what waits and stops the queue; it returns when the last
// batch is handled. Later Offers get ErrClosed. Close may be called more
// than once.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	<-q.done
}

func (q *Queue[T]) run() {
	defer close(q.done)
	batch := make([]T, 0, q.cfg.Batch)
	var markers []chan struct{}
	take := func(e entry[T]) {
		if e.flushed != nil {
			markers = append(markers, e.flushed)
		} else {
			batch = append(batch, e.v)
		}
	}
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for e := range q.ch {
		take(e)
		// Take more, up to a batch, for as long as the linger lasts (a
		// flush marker or a closed queue ends it): under load a batch
		// fills at once, idle a value waits the linger at most.
		if q.cfg.Linger > 0 {
			linger.Reset(q.cfg.Linger)
		}
	more:
		for len(batch) < q.cfg.Batch && len(markers) == 0 {
			var timeout <-chan time.Time // nil without a linger: only what waits
			if q.cfg.Linger > 0 {
				timeout = linger.C
			}
			select {
			case e, ok := <-q.ch:
				if !ok {
					break more
				}
				take(e)
			case <-timeout:
				break more
			default:
				if timeout == nil {
					break more
				}
				select {
				case e, ok := <-q.ch:
					if !ok {
						break more
					}
					take(e)
				case <-timeout:
					break more
				}
			}
		}
		linger.Stop()
		if len(batch) > 0 {
			q.handle(batch)
		}
		for _, m := range markers {
			close(m)
		}
		clear(batch)
		batch, markers = batch[:0], markers[:0]
	}
}
