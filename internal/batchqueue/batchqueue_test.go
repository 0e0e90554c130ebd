package batchqueue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder keeps the batches a queue handed over.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
}

func (r *recorder) handle(b []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, slices.Clone(b))
}

func (r *recorder) all() (values []int, batches int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		values = append(values, b...)
	}
	return values, len(r.batches)
}

func TestOrderFlushAndClose(t *testing.T) {
	var r recorder
	q := New(Config{Size: 100, Batch: 4}, r.handle)
	var want []int
	for i := range 10 {
		if err := q.Offer(i); err != nil {
			t.Fatal(err)
		}
		want = append(want, i)
	}
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.all(); !slices.Equal(got, want) {
		t.Fatalf("after Flush: handled %v, want %v", got, want)
	}
	r.mu.Lock()
	for _, b := range r.batches {
		if len(b) > 4 {
			t.Errorf("a batch of %d, over Batch 4", len(b))
		}
	}
	r.mu.Unlock()

	// Close hands over what waits, then refuses.
	for i := 10; i < 20; i++ {
		_ = q.Offer(i)
		want = append(want, i)
	}
	q.Close()
	if got, _ := r.all(); !slices.Equal(got, want) {
		t.Fatalf("after Close: handled %v, want %v", got, want)
	}
	if err := q.Offer(99); !errors.Is(err, ErrClosed) {
		t.Errorf("Offer after Close: %v, want ErrClosed", err)
	}
	if err := q.Flush(context.Background()); err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
	q.Close() // again: returns
}

// Values offered within the linger go out in one batch.
func TestLingerBatches(t *testing.T) {
	var r recorder
	q := New(Config{Size: 100, Batch: 100, Linger: time.Hour}, r.handle)
	for i := range 5 {
		_ = q.Offer(i)
	}
	// The hour-long linger is ended by the flush marker.
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, n := r.all(); n != 1 || len(got) != 5 {
		t.Fatalf("handled %v in %d batches, want 5 values in 1", got, n)
	}
	q.Close()
}

// A handler that does not keep up fills the queue: Offer says so at
// once instead of blocking, and a Flush gives up with its context.
func TestFullNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	handled := make(chan int, 10)
	q := New(Config{Size: 2, Batch: 1}, func(b []int) {
		<-release
		handled <- b[0]
	})
	defer func() { close(release); q.Close() }()
	var full bool
	for i := range 10 { // one is held by the handler, two wait, the rest are refused
		if err := q.Offer(i); errors.Is(err, ErrFull) {
			full = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("Offer never said the queue was full")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush with a stuck handler: %v, want the context's end", err)
	}
}
