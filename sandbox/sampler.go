package sandbox

import (
	"context"
	"sync"
	"time"
)

// Sampler keeps the latest metrics of every running sandbox of a provider
// while someone looks (L4): the admin page, a Prometheus scrape. Each Look
// keeps it sampling, every Every, for Idle after; with nobody looking it
// reads nothing.
type Sampler struct {
	Manager *Manager
	// List lists the provider's sandbox records.
	List func(ctx context.Context) ([]Instance, error)
	// Every is how often it samples while someone looks (default 5 s);
	// Idle how long it goes on after the last look (default 30 s).
	Every, Idle time.Duration

	mu      sync.Mutex
	latest  map[string]Sample
	looked  time.Time
	running bool
	first   chan struct{} // closed once the first round is in
	closed  bool
	wake    chan struct{} // closed by Close: the loop ends
}

// Close ends the sampling; a Look after it returns what was sampled.
func (s *Sampler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		if s.wake != nil {
			close(s.wake)
		}
	}
}

// Sample is a running sandbox's metrics with its record.
type Sample struct {
	Instance Instance `json:"-"`
	Metrics
}

// samplerConcurrency bounds the sandboxes read at once; sampleTimeout one
// sandbox's read (Docker's stats take a second or two).
const (
	samplerConcurrency = 4
	sampleTimeout      = 5 * time.Second
)

// Look returns the latest samples by sandbox ID, waiting for the first
// round when there is none yet (up to ctx), and keeps the sampler going.
func (s *Sampler) Look(ctx context.Context) map[string]Sample {
	s.mu.Lock()
	s.looked = time.Now()
	if s.wake == nil {
		s.wake = make(chan struct{})
		if s.closed {
			close(s.wake)
		}
	}
	if !s.running && !s.closed {
		// What it kept from before it went idle is stale: wait for a
		// fresh round.
		s.running, s.first, s.latest = true, make(chan struct{}), nil
		go s.loop(s.first, s.wake)
	}
	first, wake := s.first, s.wake
	s.mu.Unlock()
	select {
	case <-first:
	case <-wake:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Sample, len(s.latest))
	for id, m := range s.latest {
		out[id] = m
	}
	return out
}

func (s *Sampler) every() (every, idle time.Duration) {
	every, idle = s.Every, s.Idle
	if every <= 0 {
		every = 5 * time.Second
	}
	if idle <= 0 {
		idle = 30 * time.Second
	}
	return every, idle
}

// loop samples until nobody looked for Idle.
func (s *Sampler) loop(first, wake chan struct{}) {
	every, idle := s.every()
	for {
		s.round()
		s.mu.Lock()
		select {
		case <-first:
		default:
			close(first)
		}
		if time.Since(s.looked) > idle {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		select {
		case <-time.After(every):
		case <-wake:
			s.mu.Lock()
			s.running = false
			s.mu.Unlock()
			return
		}
	}
}

// round reads every running sandbox once.
func (s *Sampler) round() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := s.List(ctx)
	if err != nil {
		s.Manager.log.Warn("sandbox metrics: list the sandboxes", "err", err)
		return
	}
	got := map[string]Sample{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, samplerConcurrency)
	for _, inst := range list {
		if inst.Status != StatusRunning {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
			defer cancel()
			m, err := s.Manager.MetricsOf(ctx, inst.SandboxID)
			if err != nil {
				return // stopped meanwhile, or unreadable: no sample
			}
			mu.Lock()
			got[inst.SandboxID] = Sample{Instance: inst, Metrics: m}
			mu.Unlock()
		})
	}
	wg.Wait()
	s.mu.Lock()
	s.latest = got
	s.mu.Unlock()
}
