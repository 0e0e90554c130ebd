package engine

import (
	"net/http"
	"sync"

	"github.com/hibiken/asynqmon"
)

// dashboard is the queue dashboard, built on its first request: building
// it compiles some hundred route patterns and opens a Redis client, which
// an engine whose admins never open the page need not pay for at start.
type dashboard struct {
	opts asynqmon.Options
	once sync.Once
	mu   sync.Mutex
	h    *asynqmon.HTTPHandler
}

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.once.Do(func() {
		h := asynqmon.New(d.opts)
		d.mu.Lock()
		d.h = h
		d.mu.Unlock()
	})
	d.h.ServeHTTP(w, r)
}

// Close closes the dashboard's Redis client, if it was built.
func (d *dashboard) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h != nil {
		d.h.Close()
	}
}
