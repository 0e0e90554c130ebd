package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// TestSamplerFollowsRunningSandboxes: while someone looks, the sampler
// reads every running sandbox and only those; a memory hog shows within
// a few rounds; a stopped sandbox drops out.
func TestSamplerFollowsRunningSandboxes(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	a, b := newScope(t), newScope(t)
	for _, s := range []sandbox.Scope{a, b} {
		if _, err := m.Exec(ctx(t), s, sandbox.ExecRequest{Command: "true", Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	s := &sandbox.Sampler{Manager: m, Every: 50 * time.Millisecond, Idle: 500 * time.Millisecond,
		List: func(ctx context.Context) ([]sandbox.Instance, error) {
			return e.store.ByProvider(ctx, e.provider.Name())
		}}
	got := s.Look(ctx(t))
	if _, ok := got[a.SandboxID()]; !ok || len(got) != 2 {
		t.Fatalf("the first look: %v, want both sandboxes", got)
	}

	hog := make(chan error, 1)
	go func() {
		_, err := m.Exec(context.Background(), a, sandbox.ExecRequest{Command: `python3 -c "x = bytearray(160 << 20); import time; time.sleep(4)"`, Timeout: time.Minute})
		hog <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for s.Look(ctx(t))[a.SandboxID()].MemoryBytes < 150<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the hog's memory never showed: %+v", s.Look(ctx(t))[a.SandboxID()])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-hog; err != nil {
		t.Fatal(err)
	}

	if err := m.Stop(ctx(t), b.SandboxID()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, ok := s.Look(ctx(t))[b.SandboxID()]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stopped sandbox is still sampled")
		}
	}
}
