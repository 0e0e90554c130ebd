package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestWorkspaceOrphans: reconciliation removes the chat directories that
// no chat and no sandbox record owns, once past the grace period, and
// those whose owner is unknown; the deletion of chats and apps removes
// theirs.
func TestWorkspaceOrphans(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	past := time.Now().Add(-time.Hour)
	root := t.TempDir()
	ws, err := workspace.New(workspace.Config{Root: root, Now: func() time.Time { return past }})
	if err != nil {
		t.Fatal(err)
	}
	chats := history.New(db)
	records, err := mongostore.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := workspace.ChatData{Files: ws, Chats: chats, Records: records, Provider: "bwrap"}
	scope := func(chat string) sandbox.Scope { return sandbox.Scope{AppID: "app", UserID: "u", ChatID: chat} }
	dirs := func() []string {
		owners, err := ws.Dirs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range owners {
			out = append(out, o.ChatID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []string{"recorded", "running", "ghost", "doomed", "other-app"} {
		s := scope(c)
		if c == "other-app" {
			s.AppID = "app2"
		}
		if _, err := ws.Mounts(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chats.Create(ctx, history.Chat{ID: "recorded", AppID: "app", UserID: "u"}, "files", past); err != nil {
		t.Fatal(err)
	}
	if _, err := chats.Create(ctx, history.Chat{ID: "other-app", AppID: "app2", UserID: "u"}, "files", past); err != nil {
		t.Fatal(err)
	}
	if err := records.Touch(ctx, sandbox.Instance{Provider: "bwrap", SandboxID: scope("running").SandboxID(), AppID: "app", UserID: "u", ChatID: "running",
		Status: sandbox.StatusRunning}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := chats.Create(ctx, history.Chat{ID: "doomed", AppID: "app", UserID: "u"}, "files", past); err != nil {
		t.Fatal(err)
	}
	// A directory whose owner.json never got written.
	unknown := filepath.Join(root, "chats", sandbox.IDFor("x", "y", "z"))
	if err := os.MkdirAll(filepath.Join(unknown, "uploads"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(unknown, old, old); err != nil {
		t.Fatal(err)
	}

	// Within the grace period nothing goes.
	if n, err := data.RemoveOrphans(ctx, past.Add(-time.Minute)); err != nil || n != 0 {
		t.Errorf("RemoveOrphans within the grace = %d, %v; want 0", n, err)
	}
	if n, err := data.RemoveOrphans(ctx, time.Now()); err != nil || n != 2 {
		t.Errorf("RemoveOrphans = %d, %v; want the ghost and the unknown", n, err)
	}
	if got := dirs(); !slices.Equal(got, []string{"doomed", "other-app", "recorded", "running"}) {
		t.Errorf("after reconciliation: %v", got)
	}
	// Another user's chat "doomed" is another chat: its deletion leaves
	// u's directory alone.
	if err := data.DeleteChats(ctx, []sandbox.Scope{{AppID: "app", UserID: "someone-else", ChatID: "doomed"}}); err != nil {
		t.Fatal(err)
	}
	if got := dirs(); !slices.Equal(got, []string{"doomed", "other-app", "recorded", "running"}) {
		t.Errorf("after deleting another user's chat of the same id: %v", got)
	}
	if err := data.DeleteChats(ctx, []sandbox.Scope{scope("doomed")}); err != nil {
		t.Fatal(err)
	}
	if got := dirs(); !slices.Equal(got, []string{"other-app", "recorded", "running"}) {
		t.Errorf("after deleting a chat: %v", got)
	}
	if err := data.DeleteApp(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if got := dirs(); !slices.Equal(got, []string{"other-app"}) {
		t.Errorf("after deleting the app: %v", got)
	}
}
