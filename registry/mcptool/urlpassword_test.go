package mcptool

import (
	"context"
	"testing"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

// TestUpdateKeepsURLPassword: a form built from the public view sends
// the URL with its password hidden; saving it keeps the stored password,
// and a new URL replaces it.
func TestUpdateKeepsURLPassword(t *testing.T) {
	ctx := context.Background()
	store := NewStore(mongotest.DB(t))
	if _, err := store.Put(ctx, Server{ID: "pw", Name: "pw", Transport: TransportHTTP, URL: "https://user:hunter2@mcp.example/mcp", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	old, _ := store.Get(ctx, "pw")
	pub := old.Public()
	if pub.URL == old.URL {
		t.Fatalf("the public view shows the password: %s", pub.URL)
	}
	if _, err := store.Update(ctx, Server{ID: "pw", Name: "renamed", Transport: TransportHTTP, URL: pub.URL, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(ctx, "pw"); got.URL != old.URL || got.Name != "renamed" {
		t.Errorf("after saving the public view: %s (%s), want the stored URL kept", got.URL, got.Name)
	}
	if _, err := store.Update(ctx, Server{ID: "pw", Name: "moved", Transport: TransportHTTP, URL: "https://other.example/mcp", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(ctx, "pw"); got.URL != "https://other.example/mcp" {
		t.Errorf("a new URL was not stored: %s", got.URL)
	}
}
