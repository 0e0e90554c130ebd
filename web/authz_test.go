package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/nodes/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/web/auth"
)

// recordingDeleter remembers the deletions it was asked to record.
type recordingDeleter struct {
	mu    sync.Mutex
	calls []string
}

func (d *recordingDeleter) DeleteChats(ctx context.Context, appID string, chatIDs []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, fmt.Sprintf("chats %s %v", appID, chatIDs))
	return nil
}

func (d *recordingDeleter) DeleteApp(ctx context.Context, appID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "app "+appID)
	return nil
}

var people = map[string]auth.Principal{
	"alice": {UserID: "u:alice", Name: "alice", Role: auth.RoleUser},
	"bob":   {UserID: "u:bob", Name: "bob", Role: auth.RoleUser},
	"carol": {UserID: "u:carol", Name: "carol", Role: auth.RoleAdmin},
}

// The matrix: alice owns the private app a1 (her chat ca) and the public
// app a2 (bob's chat cb2); carol, an admin, owns the public demo app (bob's
// chat cb).
func TestAuthorizationMatrix(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	appStore, chats := apps.New(db, ts), history.New(db)
	now := time.Now()
	appStore.EnsureDemo(ctx, "u:carol", now)
	appStore.Put(ctx, apps.App{ID: "a1", Name: "private", OwnerID: "u:alice", Graph: apps.DemoGraph()}, now)
	appStore.Put(ctx, apps.App{ID: "a2", Name: "shared", OwnerID: "u:alice", Public: true, Graph: apps.DemoGraph()}, now)
	for _, c := range []struct{ chat, app, user string }{{"ca", "a1", "u:alice"}, {"cb", "demo", "u:bob"}, {"cb2", "a2", "u:bob"}} {
		ch, _ := chats.Owned(ctx, c.chat, c.app, c.user)
		if _, err := chats.AppendTurn(ctx, ch, history.Item{Role: "user", Text: "hi"}, history.Item{Role: "assistant", Text: "hello"}, now); err != nil {
			t.Fatal(err)
		}
	}
	store, _ := mongostore.New(ctx, db, nil)
	deleter := &recordingDeleter{}
	access := &Access{Apps: appStore, Chats: chats}
	ah := &AppsHandler{Apps: appStore, Access: access, Deleter: deleter, Now: time.Now}
	ch := &ChatsHandler{Apps: appStore, Chats: chats, Access: access, Deleter: deleter}
	fh := &FilesHandler{Sandboxes: lookupOnly{store}, Access: access}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		if p, ok := people[c.GetHeader("X-As")]; ok {
			c.Set(principalKey, p)
		}
	})
	api := r.Group("/api", RequireUser())
	api.GET("/apps", ah.List)
	api.POST("/apps", ah.Create)
	api.GET("/apps/:appId", ah.Get)
	api.PUT("/apps/:appId", ah.Update)
	api.DELETE("/apps/:appId", ah.Delete)
	api.GET("/apps/:appId/chats", ch.List)
	api.DELETE("/apps/:appId/chats", ch.Delete)
	api.GET("/apps/:appId/chats/:chatId", ch.Get)
	api.PATCH("/apps/:appId/chats/:chatId", ch.Rename)
	api.POST("/core/ai/sandbox/status", fh.Status)
	srv := httptest.NewServer(r)
	defer srv.Close()

	graph, _ := json.Marshal(apps.DemoGraph())
	appBody := `{"name":"renamed","graph":` + string(graph) + `}`
	tests := []struct {
		who, method, path, body string
		status                  int
		want                    string
	}{
		// apps
		{"", "GET", "/api/apps", "", 401, "sign in"},
		{"alice", "GET", "/api/apps", "", 200, `"appId":"a1"`},
		{"bob", "GET", "/api/apps", "", 200, `"appId":"demo"`},
		{"alice", "GET", "/api/apps/a1", "", 200, `"ownerId":"u:alice"`},
		{"bob", "GET", "/api/apps/a1", "", 404, `no app \"a1\"`},
		{"carol", "GET", "/api/apps/a1", "", 200, `"appId":"a1"`},
		{"bob", "GET", "/api/apps/nope", "", 404, `no app \"nope\"`},
		{"bob", "PUT", "/api/apps/a1", appBody, 404, "no app"},
		{"bob", "PUT", "/api/apps/demo", appBody, 403, "only the app's owner and admins"},
		{"alice", "PUT", "/api/apps/a1", appBody, 200, `"name":"renamed"`},
		{"carol", "PUT", "/api/apps/a1", appBody, 200, `"name":"renamed"`},
		{"alice", "PUT", "/api/apps/a1", `{"name":"x","graph":{"nodes":[{"nodeId":"n","type":"teleport"}]}}`, 422, "unknown type"},
		{"alice", "PUT", "/api/apps/a1", `{"name":`, 400, "not a valid app"},
		{"alice", "POST", "/api/apps", appBody, 201, `"ownerId":"u:alice"`},
		{"bob", "DELETE", "/api/apps/a1", "", 404, "no app"},
		// chats
		{"alice", "GET", "/api/apps/a1/chats", "", 200, `"chatId":"ca"`},
		{"bob", "GET", "/api/apps/a1/chats", "", 404, "no app"},
		{"bob", "GET", "/api/apps/demo/chats", "", 200, `"chatId":"cb"`},
		{"alice", "GET", "/api/apps/demo/chats", "", 200, `{"chats":[]}`},
		{"carol", "GET", "/api/apps/demo/chats", "", 200, `"chatId":"cb"`},
		{"bob", "GET", "/api/apps/demo/chats/cb", "", 200, `"text":"hello"`},
		{"alice", "GET", "/api/apps/demo/chats/cb", "", 404, `no chat \"cb\"`},
		{"carol", "GET", "/api/apps/demo/chats/cb", "", 200, `"text":"hello"`},
		{"alice", "GET", "/api/apps/a2/chats/cb2", "", 200, `"text":"hello"`},                // app owner reads
		{"alice", "PATCH", "/api/apps/a2/chats/cb2", `{"title":"mine now"}`, 404, "no chat"}, // but may not change
		{"bob", "PATCH", "/api/apps/a2/chats/cb2", `{"title":"renamed"}`, 200, `"title":"renamed"`},
		{"bob", "GET", "/api/apps/a1/chats/ca", "", 404, "no chat"},
		{"bob", "GET", "/api/apps/demo/chats/ca", "", 404, "no chat"}, // right chat, wrong app
		{"alice", "DELETE", "/api/apps/a2/chats", `{"chatIds":["cb2"]}`, 404, "no chat"},
		{"bob", "DELETE", "/api/apps/demo/chats", `{"chatIds":["cb","ca"]}`, 404, `no chat \"ca\"`},
		{"bob", "DELETE", "/api/apps/demo/chats", `{"chatIds":[]}`, 400, "1 to 1000 ids"},
		// the sandbox routes apply the same rules
		{"bob", "POST", "/api/core/ai/sandbox/status", `{"appId":"demo","chatId":"cb"}`, 200, `{"exists":false}`},
		{"alice", "POST", "/api/core/ai/sandbox/status", `{"appId":"demo","chatId":"cb"}`, 404, "no chat"},
		{"carol", "POST", "/api/core/ai/sandbox/status", `{"appId":"demo","chatId":"cb"}`, 200, `{"exists":false}`},
		{"", "POST", "/api/core/ai/sandbox/status", `{"appId":"demo","chatId":"cb"}`, 401, "sign in"},
		// last: deletions that succeed
		{"bob", "DELETE", "/api/apps/demo/chats", `{"chatIds":["cb"]}`, 202, `"deleted":["cb"]`},
		{"alice", "DELETE", "/api/apps/a1", "", 202, `"deleted":"a1"`},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s %s %s as %q", tc.method, tc.path, tc.body, tc.who)
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("X-As", tc.who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: got %d %s\n  want %d containing %s", name, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	if got := strings.Join(deleter.calls, "; "); got != "chats demo [cb]; app a1" {
		t.Errorf("deletions recorded: %q, want the chat and then the app", got)
	}
	if _, err := chats.Get(ctx, "cb"); err == nil {
		t.Error("the deleted chat is still there")
	}
	if _, err := appStore.Get(ctx, "a1"); err == nil {
		t.Error("the deleted app is still there")
	}
}

// lookupOnly serves the status route from the records alone.
type lookupOnly struct{ store *mongostore.Store }

func (l lookupOnly) Files(ctx context.Context, scope sandbox.Scope, actor sandbox.Actor) (sandbox.Files, error) {
	return nil, fmt.Errorf("not in this test: %w", sandbox.ErrUnavailable)
}

func (l lookupOnly) Lookup(ctx context.Context, scope sandbox.Scope) (sandbox.Instance, error) {
	return l.store.Get(ctx, "bwrap", scope.SandboxID())
}
