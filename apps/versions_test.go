package apps

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
)

func versionStores(t *testing.T) (s, other *Store) {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	db := mongotest.DB(t)
	return New(db, ts), New(db, ts) // other: another engine on the same database
}

func versionPrompt(t *testing.T, v Version) string {
	t.Helper()
	return prompt(t, App{Graph: *v.Graph})
}

// TestVersionsAreImmutable: publishing keeps the draft as it was; editing
// the draft afterwards changes no version, and the app runs the published
// one until the next publish.
func TestVersionsAreImmutable(t *testing.T) {
	s, other := versionStores(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	a := withPrompt(App{ID: "a", Name: "a", OwnerID: "u:alice", Graph: DemoGraph()}, "first")
	if err := s.Put(ctx, a, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "a"); got.PublishedVersionID != "" {
		t.Fatalf("a new app has published version %q, want none", got.PublishedVersionID)
	}
	if g, id, err := s.Running(ctx, a); err != nil || id != "" || prompt(t, App{Graph: g}) != "first" {
		t.Fatalf("Running before any publish = %q, %q, %v; want the draft", prompt(t, App{Graph: g}), id, err)
	}

	v1, err := s.Publish(ctx, "a", Publication{Note: "the first", AuthorID: "u:alice"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Number != 1 || v1.Note != "the first" || v1.AuthorID != "u:alice" || versionPrompt(t, v1) != "first" || !v1.CreatedAt.Equal(now) {
		t.Fatalf("first version = %+v (prompt %q), want number 1 of the draft", v1, versionPrompt(t, v1))
	}
	if got, _ := s.Get(ctx, "a"); got.PublishedVersionID != v1.ID {
		t.Fatalf("published version after Publish = %q, want %q", got.PublishedVersionID, v1.ID)
	}

	// The draft changes; the version does not, here or read afresh by
	// another engine, and the app still runs it.
	if err := s.Put(ctx, withPrompt(a, "second"), now); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*Store{"this engine": s, "another engine": other} {
		v, err := st.Version(ctx, "a", v1.ID)
		if err != nil || versionPrompt(t, v) != "first" {
			t.Fatalf("%s: version 1 after the draft changed: prompt %q, %v; want first", name, versionPrompt(t, v), err)
		}
		// A caller's change to its copy reaches nothing stored or cached.
		v.Graph.Nodes[1].Inputs["systemPrompt"] = []byte(`"scribbled"`)
		if again, _ := st.Version(ctx, "a", v1.ID); versionPrompt(t, again) != "first" {
			t.Fatalf("%s: a caller's change to its copy reached the version", name)
		}
	}
	cur, _ := s.Get(ctx, "a")
	if prompt(t, cur) != "second" || cur.PublishedVersionID != v1.ID {
		t.Fatalf("after the edit: draft %q, published %q; want draft second, published %s", prompt(t, cur), cur.PublishedVersionID, v1.ID)
	}
	if g, id, err := s.Running(ctx, cur); err != nil || id != v1.ID || prompt(t, App{Graph: g}) != "first" {
		t.Fatalf("Running after the edit = %q, %q, %v; want version 1's", prompt(t, App{Graph: g}), id, err)
	}

	v2, err := s.Publish(ctx, "a", Publication{Note: "the second"}, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if v2.Number != 2 || versionPrompt(t, v2) != "second" {
		t.Fatalf("second version = %+v, want number 2 of the edited draft", v2)
	}
	cur, _ = other.Get(ctx, "a")
	list, total, err := other.Versions(ctx, cur, 0, 0)
	if err != nil || total != 2 || len(list) != 2 || list[0].ID != v2.ID || list[1].ID != v1.ID {
		t.Fatalf("Versions = %+v, total %d, %v; want version 2 then 1", list, total, err)
	}
	for _, v := range list {
		if v.Graph != nil || v.GraphJSON != "" {
			t.Errorf("version %d is listed with its graph", v.Number)
		}
	}
	if page, _, _ := other.Versions(ctx, cur, 1, 1); len(page) != 1 || page[0].ID != v1.ID {
		t.Fatalf("Versions from 1, 1 of them = %+v, want version 1", page)
	}

	if _, err := s.Version(ctx, "b", v1.ID); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("app a's version asked of app b: %v, want ErrVersionNotFound", err)
	}
	if _, err := s.Version(ctx, "a", "a-v9"); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("a version never published: %v, want ErrVersionNotFound", err)
	}
}

// TestRollback: a version becomes the draft again, and the published one
// only when asked.
func TestRollback(t *testing.T) {
	s, _ := versionStores(t)
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	a := withPrompt(App{ID: "r", Name: "r", Graph: DemoGraph()}, "good")
	if err := s.Put(ctx, a, now); err != nil {
		t.Fatal(err)
	}
	good, err := s.Publish(ctx, "r", Publication{Note: "good"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, withPrompt(a, "bad"), now); err != nil {
		t.Fatal(err)
	}
	bad, err := s.Publish(ctx, "r", Publication{Note: "bad"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, withPrompt(a, "work in progress"), now); err != nil {
		t.Fatal(err)
	}

	got, err := s.Rollback(ctx, "r", good.ID, false, now)
	if err != nil {
		t.Fatal(err)
	}
	if prompt(t, got) != "good" || got.PublishedVersionID != bad.ID {
		t.Fatalf("rollback to the draft: draft %q, published %q; want draft good, published %s", prompt(t, got), got.PublishedVersionID, bad.ID)
	}
	got, err = s.Rollback(ctx, "r", good.ID, true, now)
	if err != nil {
		t.Fatal(err)
	}
	if prompt(t, got) != "good" || got.PublishedVersionID != good.ID {
		t.Fatalf("rollback with publish: draft %q, published %q; want both good (%s)", prompt(t, got), got.PublishedVersionID, good.ID)
	}
	// Rolling back makes no version: the list is as it was.
	if _, total, _ := s.Versions(ctx, got, 0, 0); total != 2 {
		t.Fatalf("%d versions after the rollbacks, want 2", total)
	}
	if _, err := s.Rollback(ctx, "r", "r-v7", true, now); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("rollback to a missing version: %v, want ErrVersionNotFound", err)
	}
}

// TestPublishChecksAndClaims: a draft that fails the check is not
// published, and publishes at once each get a number of their own.
func TestPublishChecksAndClaims(t *testing.T) {
	s, other := versionStores(t)
	ctx := context.Background()
	now := time.Now()
	if err := s.Put(ctx, App{ID: "c", Name: "c", Graph: DemoGraph()}, now); err != nil {
		t.Fatal(err)
	}
	refuse := func(nodes.Graph) []nodes.Problem { return []nodes.Problem{{NodeID: "agent", Message: "no"}} }
	var invalid *nodes.ValidationError
	if _, err := s.Publish(ctx, "c", Publication{Check: refuse}, now); !errors.As(err, &invalid) || invalid.Problems[0].NodeID != "agent" {
		t.Fatalf("publishing a refused draft: %v, want the check's problems", err)
	}
	if a, _ := s.Get(ctx, "c"); a.PublishedVersionID != "" {
		t.Fatalf("a refused draft was published as %s", a.PublishedVersionID)
	}
	if _, err := s.Publish(ctx, "missing", Publication{}, now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("publishing a missing app: %v, want ErrNotFound", err)
	}

	const n = 8
	var wg sync.WaitGroup
	numbers := make(chan int, n)
	for i := range n {
		st := s
		if i%2 == 1 {
			st = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := st.Publish(ctx, "c", Publication{}, now)
			if err != nil {
				t.Error(err)
				return
			}
			numbers <- v.Number
		}()
	}
	wg.Wait()
	close(numbers)
	seen := map[int]bool{}
	for num := range numbers {
		if seen[num] {
			t.Errorf("two publishes got number %d", num)
		}
		seen[num] = true
	}
	a, _ := other.Get(ctx, "c")
	if list, total, err := s.Versions(ctx, a, 0, 0); err != nil || total != n || len(list) != n || list[0].Number != n {
		t.Fatalf("after %d publishes at once: %d versions listed, total %d, %v", n, len(list), total, err)
	}
}

// TestDeleteRemovesVersions: an app's versions go with it, also from the
// cache.
func TestDeleteRemovesVersions(t *testing.T) {
	s, other := versionStores(t)
	ctx := context.Background()
	now := time.Now()
	for _, id := range []string{"gone", "kept"} {
		if err := s.Put(ctx, App{ID: id, Name: id, Graph: DemoGraph()}, now); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.Publish(ctx, "gone", Publication{}, now)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Publish(ctx, "kept", Publication{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Version(ctx, "gone", v.ID); err != nil { // now cached
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*Store{"this engine": s, "another engine": other} {
		if _, err := st.Version(ctx, "gone", v.ID); !errors.Is(err, ErrVersionNotFound) {
			t.Errorf("%s: a deleted app's version: %v, want ErrVersionNotFound", name, err)
		}
	}
	if n, err := s.versions.CountDocuments(ctx, bson.D{{Key: "appId", Value: "gone"}}); err != nil || n != 0 {
		t.Fatalf("%d versions of the deleted app stored (%v), want none", n, err)
	}
	if _, err := other.Version(ctx, "kept", kept.ID); err != nil {
		t.Fatalf("another app's version after the delete: %v", err)
	}
}
