package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// TestAppAndChatRules checks what the app and chat routes answer each
// caller (F3), body and all, through the product's router with real
// sessions. Alice owns the private app a1 (her chat ca) and the public app
// a2 (bob's chat cb2); the first admin owns the public demo app (bob's
// chat cb).
func TestAppAndChatRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := enginetest.Start(t, enginetest.Options{})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	bobID := env.CreateUser(t, "bob", auth.RoleUser)
	as := map[string]*enginetest.Client{
		"":      env.Anonymous(),
		"alice": env.Login(t, "alice", enginetest.Password("alice")),
		"bob":   env.Login(t, "bob", enginetest.Password("bob")),
		"admin": env.Login(t, enginetest.AdminName, enginetest.AdminPassword),
	}
	newApp := func(name string, public bool) string {
		resp := as["alice"].Do(t, "POST", "/api/apps", map[string]any{"name": name, "public": public, "graph": apps.DemoGraph()})
		var app struct {
			ID string `json:"appId"`
		}
		resp.JSON(t, &app)
		if resp.Status != http.StatusCreated || app.ID == "" {
			t.Fatalf("create app %s: %d %s", name, resp.Status, resp.Body)
		}
		return app.ID
	}
	a1, a2, demo := newApp("private", false), newApp("shared", true), apps.DemoAppID
	ca, _ := say(t, as["alice"], a1, "", "hi from alice")
	cb, answer := say(t, as["bob"], demo, "", "hi from bob")
	cb2, _ := say(t, as["bob"], a2, "", "hi from bob in shared")
	if !strings.Contains(answer, "offline demo model") {
		t.Fatalf("the demo model answered %q, want its explanation", answer)
	}

	appBody := map[string]any{"name": "renamed", "graph": apps.DemoGraph()}
	chats := func(app string) string { return "/api/apps/" + app + "/chats" }
	chat := func(app, id string) string { return chats(app) + "/" + id }
	status := func(app, id string) map[string]string { return map[string]string{"appId": app, "chatId": id} }
	tests := []struct {
		who, method, path string
		body              any
		status            int
		want              string
	}{
		// apps
		{"", "GET", "/api/apps", nil, 401, "sign in"},
		{"alice", "GET", "/api/apps", nil, 200, `"appId":"` + a1 + `"`},
		{"bob", "GET", "/api/apps", nil, 200, `"appId":"demo"`},
		{"alice", "GET", "/api/apps/" + a1, nil, 200, `"ownerId":"` + aliceID + `"`},
		{"bob", "GET", "/api/apps/" + a1, nil, 404, "no app " + quoted(a1)},
		{"admin", "GET", "/api/apps/" + a1, nil, 200, `"appId":"` + a1 + `"`},
		{"bob", "GET", "/api/apps/nope", nil, 404, "no app " + quoted("nope")},
		{"bob", "PUT", "/api/apps/" + a1, appBody, 404, "no app"},
		{"bob", "PUT", "/api/apps/demo", appBody, 403, "only the app's owner and admins"},
		{"alice", "PUT", "/api/apps/demo", appBody, 403, "only the app's owner and admins"},
		{"alice", "PUT", "/api/apps/" + a1, appBody, 200, `"name":"renamed"`},
		{"admin", "PUT", "/api/apps/" + a1, appBody, 200, `"name":"renamed"`},
		{"alice", "PUT", "/api/apps/" + a1, []byte(`{"name":"x","graph":{"nodes":[{"nodeId":"n","type":"teleport"}]}}`), 422, "unknown type"},
		{"alice", "PUT", "/api/apps/" + a1, []byte(`{"name":`), 400, "not a valid app"},
		{"alice", "POST", "/api/apps", appBody, 201, `"ownerId":"` + aliceID + `"`},
		{"bob", "DELETE", "/api/apps/" + a1, nil, 404, "no app"},
		// chats
		{"alice", "GET", chats(a1), nil, 200, `"chatId":"` + ca + `"`},
		{"bob", "GET", chats(a1), nil, 404, "no app"},
		{"bob", "GET", chats(demo), nil, 200, `"chatId":"` + cb + `"`},
		{"alice", "GET", chats(demo), nil, 200, `{"chats":[]}`},
		{"admin", "GET", chats(demo), nil, 200, `"chatId":"` + cb + `"`},
		{"bob", "GET", chats(a2), nil, 200, `"chatId":"` + cb2 + `"`},
		{"bob", "GET", chat(demo, cb), nil, 200, `"text":"hi from bob"`},
		{"alice", "GET", chat(demo, cb), nil, 404, "no chat " + quoted(cb)},
		{"alice", "GET", chat(demo, cb) + "?userId=" + bobID, nil, 404, "no chat " + quoted(cb)},
		{"admin", "GET", chat(demo, cb), nil, 404, "no chat " + quoted(cb)}, // the admin's own chat cb: none
		{"admin", "GET", chat(demo, cb) + "?userId=" + bobID, nil, 200, `"text":"hi from bob"`},
		{"alice", "GET", chat(a2, cb2) + "?userId=" + bobID, nil, 200, `"text":"hi from bob in shared"`},               // the app's owner reads
		{"alice", "PATCH", chat(a2, cb2) + "?userId=" + bobID, map[string]string{"title": "mine now"}, 404, "no chat"}, // but may not change
		{"bob", "PATCH", chat(a2, cb2), map[string]string{"title": "renamed"}, 200, `"title":"renamed"`},
		{"bob", "GET", chat(a1, ca), nil, 404, "no chat"},
		{"alice", "GET", chat(demo, ca), nil, 404, "no chat " + quoted(ca)}, // her chat, another app
		{"bob", "GET", chat(demo, ca), nil, 404, "no chat"},
		{"alice", "DELETE", chats(a2), map[string]any{"chatIds": []string{cb2}}, 404, "no chat"},
		{"alice", "DELETE", chats(a2), map[string]any{"chatIds": []string{cb2}, "userId": bobID}, 404, "no chat"},
		{"bob", "DELETE", chats(demo), map[string]any{"chatIds": []string{cb, ca}}, 404, "no chat " + quoted(ca)},
		{"bob", "DELETE", chats(demo), map[string]any{"chatIds": []string{}}, 400, "1 to 1000 ids"},
		// the sandbox routes apply the same rules
		{"bob", "POST", "/api/core/ai/sandbox/status", status(demo, cb), 200, `{"exists":false}`},
		{"alice", "POST", "/api/core/ai/sandbox/status", status(demo, cb), 200, `{"exists":false}`}, // her own chat of that id
		{"admin", "POST", "/api/core/ai/sandbox/status", map[string]string{"appId": demo, "chatId": cb, "userId": bobID}, 200, `{"exists":false}`},
		{"alice", "POST", "/api/core/ai/sandbox/status", map[string]string{"appId": demo, "chatId": cb, "userId": bobID}, 404, "no chat"},
		{"", "POST", "/api/core/ai/sandbox/status", status(demo, cb), 401, "sign in"},
		// last: deletions that succeed
		{"bob", "DELETE", chats(demo), map[string]any{"chatIds": []string{cb}}, 202, `"deleted":["` + cb + `"]`},
		{"alice", "DELETE", "/api/apps/" + a1, nil, 202, `"deleted":"` + a1 + `"`},
	}
	for _, tc := range tests {
		resp := as[tc.who].Do(t, tc.method, tc.path, tc.body)
		if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.want) {
			t.Errorf("%s %s %s as %q: got %d %s\n  want %d containing %s", tc.method, tc.path, shown(tc.body), tc.who, resp.Status, resp.Body, tc.status, tc.want)
		}
	}

	// The deletions that succeeded are recorded for the workers, and only
	// those: a refused request records nothing.
	deletions := env.Engine.Services.Store
	for key, want := range map[string]bool{
		mongostore.ChatDeletionKey(sandbox.Scope{AppID: demo, UserID: bobID, ChatID: cb}): true,
		mongostore.AppDeletionKey(a1): true,
		mongostore.ChatDeletionKey(sandbox.Scope{AppID: demo, UserID: bobID, ChatID: ca}): false,
		mongostore.ChatDeletionKey(sandbox.Scope{AppID: a1, UserID: aliceID, ChatID: ca}): false,
		mongostore.ChatDeletionKey(sandbox.Scope{AppID: a2, UserID: bobID, ChatID: cb2}):  false,
	} {
		d, err := deletions.GetDeletion(ctx, key)
		if got := err == nil; got != want {
			t.Errorf("deletion %s recorded: %v (%+v, %v), want %v", key, got, d, err, want)
		} else if want && d.State != mongostore.DeletionPending {
			t.Errorf("deletion %s: state %q, want %q (the workers are not running)", key, d.State, mongostore.DeletionPending)
		}
	}
	if resp := as["bob"].Do(t, "GET", chat(demo, cb), nil); resp.Status != 404 {
		t.Errorf("the deleted chat: %d %s, want 404", resp.Status, resp.Body)
	}
	if resp := as["bob"].Do(t, "GET", chat(a2, cb2), nil); resp.Status != 200 {
		t.Errorf("bob's other chat: %d %s, want 200", resp.Status, resp.Body)
	}
	if resp := as["alice"].Do(t, "GET", "/api/apps/"+a1, nil); resp.Status != 404 {
		t.Errorf("the deleted app: %d %s, want 404", resp.Status, resp.Body)
	}
}

// shown is a request body for a failure message.
func shown(b any) string {
	switch b := b.(type) {
	case nil:
		return ""
	case []byte:
		return string(b)
	}
	return fmt.Sprintf("%v", b)
}
