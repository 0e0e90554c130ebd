package sandbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

// specRecorder records the specs the manager ensures, and ensures nothing.
type specRecorder struct {
	sandbox.Provider
	mu    sync.Mutex
	specs []sandbox.Spec
}

func (r *specRecorder) Ensure(ctx context.Context, spec sandbox.Spec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs = append(r.specs, spec)
	return nil
}

// The operator's allowlist reaches the spec; an app's can only narrow it.
func TestEgressSpec(t *testing.T) {
	e := newEnv(t)
	operator := []string{"pypi.org", "*.pythonhosted.org"}
	for _, tc := range []struct {
		name string
		app  []string // nil: no hook
		want []string
	}{
		{"operator's", nil, operator},
		{"narrowed", []string{"files.pythonhosted.org", "evil.com"}, []string{"files.pythonhosted.org"}},
		{"turned off", []string{}, []string{}},
		{"widened is dropped", []string{"*.org"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &specRecorder{Provider: e.provider}
			cfg := sandbox.Config{Provider: rec, Store: e.store, Now: e.clock.Now, Egress: operator}
			if tc.app != nil {
				cfg.EgressFor = func(ctx context.Context, scope sandbox.Scope) []string { return tc.app }
			}
			m, err := sandbox.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Ensure(ctx(t), newScope(t)); err != nil {
				t.Fatal(err)
			}
			if got := rec.specs[0].Egress; fmt.Sprint(got) != fmt.Sprint(tc.want) || rec.specs[0].Network {
				t.Errorf("spec egress = %q (network %v), want %q", got, rec.specs[0].Network, tc.want)
			}
		})
	}
	if _, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Network: true, Egress: operator}); err == nil {
		t.Error("Network and Egress together were accepted")
	}
	if _, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Egress: []string{"10.0.0.1"}}); err == nil {
		t.Error("an IP address in Egress was accepted")
	}
}
