package apps

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func prompt(t *testing.T, a App) string {
	t.Helper()
	var p string
	_ = json.Unmarshal(a.Graph.Nodes[1].Inputs["systemPrompt"], &p)
	return p
}

func withPrompt(a App, p string) App {
	a = a.clone()
	b, _ := json.Marshal(p)
	a.Graph.Nodes[1].Inputs["systemPrompt"] = b
	return a
}

func TestCachedAppsSeeChanges(t *testing.T) {
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	db := mongotest.DB(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	s, other := New(db, ts), New(db, ts) // other: another engine on the same database
	s.now = func() time.Time { return now }
	if err := s.Put(ctx, App{ID: "a", Name: "a", Graph: DemoGraph()}, now); err != nil {
		t.Fatal(err)
	}
	first, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}

	// Changing what Get returned changes nothing stored or cached.
	first.Graph.Nodes[1].Inputs["systemPrompt"] = json.RawMessage(`"scribbled"`)
	if got, _ := s.Get(ctx, "a"); prompt(t, got) == "scribbled" {
		t.Fatal("a caller's change to its copy reached the cache")
	}

	// A change through this store: the next Get has it.
	if err := s.Put(ctx, withPrompt(first, "v2"), now); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "a"); prompt(t, got) != "v2" {
		t.Fatalf("after Put: prompt %q, want v2", prompt(t, got))
	}

	// A change by another engine: seen once the cached copy is too old.
	if err := other.Put(ctx, withPrompt(first, "v3"), now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(CacheMaxAge)
	if got, _ := s.Get(ctx, "a"); prompt(t, got) != "v3" {
		t.Fatalf("%v after another engine's Put: prompt %q, want v3", CacheMaxAge, prompt(t, got))
	}

	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v, want ErrNotFound", err)
	}
}
