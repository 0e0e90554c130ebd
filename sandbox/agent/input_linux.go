package agent

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// inputQueue holds what a client sent for a command's standard input
// until the command reads it, up to MaxStdinQueue bytes, so that reading
// the client's frames never waits on the command.
type inputQueue struct {
	mu    sync.Mutex
	ready *sync.Cond
	bufs  [][]byte
	size  int
	ended bool
}

func newInputQueue() *inputQueue {
	q := &inputQueue{}
	q.ready = sync.NewCond(&q.mu)
	return q
}

// push queues a copy of p; false when that would pass the bound.
func (q *inputQueue) push(p []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return true // input after its end is dropped
	}
	if q.size+len(p) > MaxStdinQueue {
		return false
	}
	q.bufs = append(q.bufs, bytes.Clone(p))
	q.size += len(p)
	q.ready.Signal()
	return true
}

// end marks the end of the input: what is queued is still written.
func (q *inputQueue) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	q.ready.Signal()
}

// pop takes the next chunk, waiting for one; ok is false at the end.
func (q *inputQueue) pop() (p []byte, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.bufs) == 0 && !q.ended {
		q.ready.Wait()
	}
	if len(q.bufs) == 0 {
		return nil, false
	}
	p, q.bufs = q.bufs[0], q.bufs[1:]
	q.size -= len(p)
	return p, true
}

// feed writes the queued input to the command until the input ends or
// the command stops reading, then closes the command's end.
func (q *inputQueue) feed(w *os.File) {
	defer w.Close()
	for {
		p, ok := q.pop()
		if !ok {
			return
		}
		if _, err := w.Write(p); err != nil {
			return // the command closed its input or ended
		}
	}
}

// frameWriter writes frames to the client, one at a time. After a failed
// write the stream may be cut mid-frame, so every later write fails too.
type frameWriter struct {
	mu  sync.Mutex
	c   net.Conn
	err error
}

func (w *frameWriter) write(typ byte, p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	h := frameHeader(typ, len(p))
	bufs := net.Buffers{h[:], p}
	_, w.err = bufs.WriteTo(w.c)
	return w.err
}

// copyFrom sends what r gives as frames of typ until r ends. When the
// client is gone it keeps reading, so that the command is not blocked on
// a full pipe before it is killed.
func (w *frameWriter) copyFrom(r io.Reader, typ byte) {
	buf := make([]byte, MaxFrame)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_ = w.write(typ, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// abort makes writes blocked on a client that does not read fail.
func (w *frameWriter) abort() {
	_ = w.c.SetWriteDeadline(time.Unix(1, 0))
}

// finish writes the last frame, bounded in time.
func (w *frameWriter) finish(typ byte, p []byte) {
	if len(p) > MaxFrame {
		p = p[:MaxFrame]
	}
	_ = w.c.SetWriteDeadline(time.Now().Add(answerTimeout))
	_ = w.write(typ, p)
}
