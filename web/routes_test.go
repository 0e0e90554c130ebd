package web_test

// The access rules of every route, checked through the product as engine
// serve builds it (engine), with real sessions, CSRF tokens, API
// keys, the service key and the admin token, on the embedded database and
// bwrap. Each row is one route; each column one kind of caller.

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/registry/mcptool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/web/account"
	"github.com/flowbox/flowbox/web/api"
)

// The callers of the table, in the order they are tried on each route.
const (
	anonymous    = "anonymous"
	wrongKey     = "wrong key"
	userSession  = "user session" // carol: owns the chat the rows name
	userNoCSRF   = "user session, no CSRF token"
	userKey      = "user API key"                 // carol's personal key
	serviceKey   = "service key"                  // FLOWBOX_API_KEY, customUid carol
	appOwner     = "app owner"                    // alice: owns both apps
	otherUser    = "other user"                   // bob
	adminSession = "admin"                        // a signed-in admin
	adminToken   = "admin token"                  // FLOWBOX_ADMIN_TOKEN as a bearer
	adminBasic   = "admin token, basic"           // the same as basic auth's password
	forged       = "forged session"               // a session cookie no sign-in made
	wrongCSRF    = "another session's CSRF token" // carol's cookie, bob's token
	// Credentials that worked once: refused like ones that never did.
	disabledSession = "disabled user's session" // dora's, before an admin disabled her
	disabledKey     = "disabled user's key"     // dora's key
	revokedKey      = "revoked key"             // a key carol revoked
	expiredKey      = "expired key"             // a key of carol's past its expiry
	// Callers bound to one app.
	appKey       = "app key"                // a key of the shared app
	appKeyOther  = "app key of another app" // a key of alice's private app
	linkVisitor  = "share-link visitor"     // a visitor of a link to the shared app, with a chat there
	visitorOther = "another share visitor"  // another visitor of the same link
)

var callers = []string{anonymous, wrongKey, userNoCSRF, wrongCSRF, userSession, userKey, serviceKey, appOwner, otherUser, adminSession, adminToken, adminBasic, forged,
	disabledSession, disabledKey, revokedKey, expiredKey, appKey, appKeyOther, linkVisitor, visitorOther}

// like names the caller whose column a caller's status is read from,
// where it is not a column of its own: dead credentials are refused as
// wrong ones, and a visitor's cookie is the link's only, so elsewhere a
// visitor is anonymous.
func like(caller, path string) string {
	switch caller {
	case disabledKey, revokedKey, expiredKey:
		return wrongKey
	case disabledSession:
		return forged
	case wrongCSRF:
		return userNoCSRF
	case linkVisitor, visitorOther:
		if !strings.HasPrefix(path, "/share/") {
			return anonymous
		}
	}
	return caller
}

// fixture is what the rows name: alice's public app "shared", in which
// carol has a chat with a running sandbox, and alice's private app.
type fixture struct {
	env       *enginetest.Env
	clients   map[string]*enginetest.Client
	shared    string            // alice's public app
	private   string            // alice's private app
	chat      string            // carol's chat in shared, with a sandbox
	sandboxID string            // its sandbox
	victim    string            // the sandbox of another chat of carol's, for the admin's delete
	fresh     map[string]string // per caller, a chat of carol's that the caller may try to delete
	dave      string            // a user the admins' rows disable, enable and reset
	version   string            // the shared app's first published version
	link      string            // a share link to the shared app (files read-write)
	expired   string            // a link to it that has expired
	visited   string            // the visitor's chat through link
	carol     string            // carol's user id: chat ids are scoped per app and user, so rows name her chats with it
	visitorID string            // the visitor's user id
	skillZip  []byte            // the markdown-report example skill, zipped
}

func newFixture(t *testing.T) *fixture {
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	carol := env.CreateUser(t, "carol", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	zipped, err := skills.ZipDir(filepath.Join("..", "skills", "markdown-report"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.Services.MCPServers.Put(t.Context(), mcptool.Server{ID: "fx", Name: "fixture", Transport: "stdio",
		Command: []string{"/workspace/mcp"}, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: env, skillZip: zipped, carol: carol, clients: map[string]*enginetest.Client{
		anonymous:    env.Anonymous(),
		wrongKey:     env.Bearer("fbk_not-a-key"),
		userSession:  env.Login(t, "carol", enginetest.Password("carol")),
		userKey:      env.Bearer(env.APIKey(t, carol)),
		serviceKey:   env.Bearer(enginetest.ServiceKey),
		appOwner:     env.Login(t, "alice", enginetest.Password("alice")),
		otherUser:    env.Login(t, "bob", enginetest.Password("bob")),
		adminSession: env.Login(t, enginetest.AdminName, enginetest.AdminPassword),
		adminToken:   env.Bearer(enginetest.AdminToken),
	}}
	// Carol's session without its token: same cookies, no X-CSRF-Token.
	noCSRF := *f.clients[userSession]
	noCSRF.CSRF = ""
	f.clients[userNoCSRF] = &noCSRF
	stolen := *f.clients[userSession]
	stolen.CSRF = f.clients[otherUser].CSRF
	f.clients[wrongCSRF] = &stolen
	f.clients[forged] = env.Anonymous()
	f.clients[forged].Header.Set("Cookie", api.SessionCookie+"=fbs_forged")
	basic := env.Anonymous()
	basic.Header.Set("Authorization", "Basic "+basicAuth("operator", enginetest.AdminToken))
	f.clients[adminBasic] = basic

	f.shared = f.createApp(t, "shared", true)
	f.private = f.createApp(t, "private", false)
	f.deadCredentials(t, carol)
	f.publish(t)
	f.chat = f.chatWithSandbox(t)
	f.victim = sandbox.IDFor(f.shared, carol, f.chatWithSandbox(t))
	f.sandboxID = sandbox.IDFor(f.shared, carol, f.chat)
	f.dave = env.CreateUser(t, "dave", auth.RoleUser)
	f.fresh = map[string]string{}
	for _, caller := range callers {
		f.fresh[caller] = f.chatWithSandbox(t)
	}
	waitUntil(t, "the brief key and link expire", func() bool {
		return f.clients[expiredKey].Do(t, "GET", "/api/me", nil).Status == 401 &&
			env.Anonymous().Do(t, "GET", "/share/"+f.expired, nil).Status == 410
	})
	return f
}

// deadCredentials makes the credentials that no longer work: dora's
// session and key (then dora is disabled), a key carol revoked and one
// that has expired.
func (f *fixture) deadCredentials(t *testing.T, carol string) {
	env, admin, owner := f.env, f.clients[adminSession], f.clients[userSession]
	dora := env.CreateUser(t, "dora", auth.RoleUser)
	f.clients[disabledSession] = env.Login(t, "dora", enginetest.Password("dora"))
	f.clients[disabledKey] = env.Bearer(env.APIKey(t, dora))
	expect(t, admin, "POST", "/admin/api/users/"+dora+"/disable", nil, 200)
	var revoked struct{ Key string }
	expect(t, owner, "POST", "/api/keys", map[string]any{"name": "revoked"}, 201).JSON(t, &revoked)
	var keys struct{ Keys []struct{ ID, Name string } }
	expect(t, owner, "GET", "/api/keys", nil, 200).JSON(t, &keys)
	for _, k := range keys.Keys {
		if k.Name == "revoked" {
			expect(t, owner, "DELETE", "/api/keys/"+k.ID, nil, 200)
		}
	}
	f.clients[revokedKey] = env.Bearer(revoked.Key)
	var brief struct{ Key string }
	expect(t, owner, "POST", "/api/keys", map[string]any{"name": "brief", "expiresAt": time.Now().Add(time.Second).Format(time.RFC3339Nano)}, 201).JSON(t, &brief)
	f.clients[expiredKey] = env.Bearer(brief.Key)
	for _, c := range []string{disabledSession, disabledKey, revokedKey} {
		expect(t, f.clients[c], "GET", "/api/me", nil, 401)
	}
}

// publish gives the shared app a published version, a key and share
// links, the private app a key, and makes the visitors: one with a chat
// through the link.
func (f *fixture) publish(t *testing.T) {
	env, alice := f.env, f.clients[appOwner]
	var v struct {
		ID string `json:"versionId"`
	}
	expect(t, alice, "POST", "/api/apps/"+f.shared+"/versions", map[string]any{"note": "the fixture's"}, 201).JSON(t, &v)
	f.version = v.ID
	for caller, app := range map[string]string{appKey: f.shared, appKeyOther: f.private} {
		var k struct{ Key string }
		expect(t, alice, "POST", "/api/apps/"+app+"/keys", map[string]any{"name": caller}, 201).JSON(t, &k)
		f.clients[caller] = env.Bearer(k.Key)
	}
	f.link = newLink(t, alice, f.shared, map[string]any{"name": "table", "showTools": true, "files": "write"}).ID
	f.expired = newLink(t, alice, f.shared, map[string]any{"name": "brief", "expiresAt": time.Now().Add(time.Second).Format(time.RFC3339Nano)}).ID
	f.clients[linkVisitor] = visit(t, env, "/share/"+f.link)
	f.clients[visitorOther] = visit(t, env, "/share/"+f.link)
	f.visited, _ = sendTurn(t, f.clients[linkVisitor], "/share/"+f.link+"/api/v1/chat/completions",
		map[string]any{"messages": message("$ echo visited > visitor.txt")}, 200)
	f.visitorID = chatOf(t, env, f.shared, f.visited).UserID
}

// createApp makes an app of alice's with the demo app's graph.
func (f *fixture) createApp(t *testing.T, name string, public bool) string {
	t.Helper()
	resp := f.clients[appOwner].Do(t, "POST", "/api/apps", map[string]any{"name": name, "public": public, "graph": apps.DemoGraph()})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create app %s: %d %s", name, resp.Status, resp.Body)
	}
	var app struct {
		ID string `json:"appId"`
	}
	resp.JSON(t, &app)
	return app.ID
}

// chatWithSandbox starts a chat of carol's in the shared app whose first
// turn runs a command, so the chat has a sandbox.
func (f *fixture) chatWithSandbox(t *testing.T) string {
	t.Helper()
	resp := f.clients[userSession].Do(t, "POST", "/api/v1/chat/completions", map[string]any{
		"appId": f.shared, "messages": []map[string]string{{"role": "user", "content": "$ echo ready > ready.txt"}}})
	if resp.Status != http.StatusOK {
		t.Fatalf("first turn: %d %s", resp.Status, resp.Body)
	}
	var body struct{ ID string }
	resp.JSON(t, &body)
	if body.ID == "" {
		t.Fatalf("first turn: no chat id in %s", resp.Body)
	}
	return body.ID
}

func basicAuth(user, password string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, password)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// route is one row: a request and the status each caller gets.
type route struct {
	method, path string
	// pathFor, when set, gives each caller a path of its own (a resource
	// made for it, which the request may delete).
	pathFor func(f *fixture, t *testing.T, caller string) string
	body    func(f *fixture, caller string) any
	// only, when set, limits the row to these callers.
	only []string
	// open routes read no credentials at all.
	open bool
	// want is the status per caller; callers not named get def.
	want map[string]int
	def  int
	// upload sends the body as one file of a multipart form (the upload
	// API); body must then give []byte.
	upload bool
}

// Statuses by who may call, reused by the rows.
var (
	// Public routes answer everyone who sends no bad credentials.
	public = map[string]int{}
	// Signed-in users' reads: sessions and user keys; other bearers are
	// not user keys.
	// App keys reach only their app's chats and files.
	userRead = map[string]int{anonymous: 401, wrongKey: 401, serviceKey: 401, adminToken: 401, adminBasic: 401, appKey: 403, appKeyOther: 403}
	// The same for changes: a session must send its CSRF token.
	userWrite = with(userRead, map[string]int{userNoCSRF: 403})
	// The sandbox service API: every key and session, app keys included.
	sbRead  = map[string]int{anonymous: 401, wrongKey: 401, serviceKey: 401, adminToken: 401, adminBasic: 401}
	sbWrite = with(sbRead, map[string]int{userNoCSRF: 403})
	// A session of carol's: hers (her session and key), missing to the
	// other callers.
	carolsRead = with(sbRead, map[string]int{userSession: 200, userNoCSRF: 200, userKey: 200})
	// Admin routes: admins and the admin token only.
	adminOnly = map[string]int{anonymous: 401, wrongKey: 401, serviceKey: 401,
		userSession: 403, userNoCSRF: 403, userKey: 403, appOwner: 403, otherUser: 403, appKey: 403, appKeyOther: 403}
)

// carolsWrite is a change to a session of carol's: ok for her, refused
// without the CSRF token, missing to the others.
func carolsWrite(ok int) map[string]int {
	return with(sbRead, map[string]int{userSession: ok, userNoCSRF: 403, userKey: ok})
}

// carolSession makes a session with carol's key for each caller and
// gives its path, with rest after it.
func carolSession(rest string) func(f *fixture, t *testing.T, caller string) string {
	return func(f *fixture, t *testing.T, _ string) string {
		r := f.clients[userKey].Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"name": "carol's"})
		var s struct{ ID string }
		r.JSON(t, &s)
		if r.Status != http.StatusCreated || s.ID == "" {
			t.Fatalf("create carol's session: %d %s", r.Status, r.Body)
		}
		return "/api/sandbox/v1/sessions/" + s.ID + rest
	}
}

func with(base map[string]int, more map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// without drops callers from a status map, so that they get a row's def.
func without(base map[string]int, callers ...string) map[string]int {
	out := with(base, nil)
	for _, c := range callers {
		delete(out, c)
	}
	return out
}

func jsonBody(v map[string]any) func(*fixture, string) any {
	return func(*fixture, string) any { return v }
}

func (f *fixture) routes() []route {
	// Every row names carol's chat by its user too: without it, a caller
	// names a chat of its own of that id (chat ids are scoped per app and
	// user), which says nothing about who may reach carol's.
	chatPath := "/api/apps/" + f.shared + "/chats/" + f.chat + "?userId=" + f.carol
	file := func(action string, extra map[string]any) func(*fixture, string) any {
		return func(f *fixture, _ string) any {
			b := map[string]any{"action": action, "appId": f.shared, "chatId": f.chat, "userId": f.carol, "path": "/workspace"}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
	}
	// Who may reach carol's chat (F3): carol and admins read and write,
	// alice as the app's owner reads, bob learns nothing; app keys, the
	// app's own too, learn nothing of an account user's chat (T5).
	chatRead := with(userRead, map[string]int{otherUser: 404, appKey: 404, appKeyOther: 404})
	chatWrite := with(userWrite, map[string]int{otherUser: 404, appOwner: 404, appKey: 404, appKeyOther: 404})
	// Publishing the shared (public) app: alice and admins; carol and bob
	// may use it but not publish it.
	publishRead := with(userRead, map[string]int{userSession: 403, userNoCSRF: 403, userKey: 403, otherUser: 403})
	publishWrite := with(userWrite, map[string]int{userSession: 403, userKey: 403, otherUser: 403})
	// A share link's API: its visitors, each in their own chats.
	shareAPI := "/share/" + f.link + "/api"
	visitorFile := func(action string, extra map[string]any) func(*fixture, string) any {
		return func(f *fixture, _ string) any {
			b := map[string]any{"action": action, "appId": f.shared, "chatId": f.visited, "userId": f.visitorID, "path": "/workspace"}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
	}
	visitorOnly := map[string]int{linkVisitor: 200, visitorOther: 404}
	appBody := func(name string, public bool) func(*fixture, string) any {
		return func(*fixture, string) any {
			return map[string]any{"name": name, "public": public, "graph": apps.DemoGraph()}
		}
	}
	turn := func(app func(*fixture) string) func(*fixture, string) any {
		return func(f *fixture, caller string) any {
			b := map[string]any{"appId": app(f), "messages": []map[string]string{{"role": "user", "content": "hello from " + caller}}}
			if caller == serviceKey {
				b["customUid"] = "carol-from-a-program"
			}
			return b
		}
	}
	return []route{
		{method: "GET", path: "/healthz", open: true, want: public, def: 200},
		{method: "GET", path: "/readyz", open: true, want: public, def: 200},
		{method: "GET", path: "/metrics", open: true, want: public, def: 200},
		{method: "GET", path: "/ui/.keep", open: true, want: public, def: 200},
		{method: "GET", path: "/login", want: map[string]int{wrongKey: 401, serviceKey: 401, adminToken: 401}, def: 200},
		// Signing in needs no credentials; the login rate limit makes this
		// row short.
		{method: "POST", path: "/api/login", open: true, only: []string{anonymous, userSession, forged},
			body: jsonBody(map[string]any{"name": "carol", "password": "wrong"}), want: public, def: 401},

		// The chat API: users and programs with the service key.
		{method: "POST", path: "/api/v1/chat/completions", body: turn(func(f *fixture) string { return f.shared }),
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401}, def: 200},
		{method: "POST", path: "/api/v1/chat/completions", body: turn(func(f *fixture) string { return f.private }),
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401,
				userSession: 404, userKey: 404, otherUser: 404}, def: 200},
		// Stopping a run (E3): carol's idle chat is hers alone; everyone
		// else names a chat they do not have.
		{method: "POST", path: "/api/v1/chat/stop", body: jsonBody(map[string]any{"appId": f.shared, "chatId": f.chat}),
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401,
				userSession: 200, userKey: 200}, def: 404},
		{method: "GET", path: "/api/v1/models", want: map[string]int{anonymous: 401, wrongKey: 401, adminToken: 401, adminBasic: 401}, def: 200},
		// Rewind, redo and fork (R2, R3): the same callers; this engine
		// keeps no checkpoints, which every caller who gets through is
		// told (TestRewind runs them on an engine that does).
		{method: "DELETE", path: "/api/core/chat/item/delete?appId=" + f.shared + "&chatId=" + f.chat + "&contentId=" + f.chat + "/00000000",
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401}, def: 501},
		{method: "POST", path: "/api/core/chat/item/delete", body: jsonBody(map[string]any{"appId": f.shared, "chatId": f.chat, "contentId": f.chat + "/00000000"}),
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401}, def: 501},
		{method: "POST", path: "/api/core/chat/item/redo", body: jsonBody(map[string]any{"appId": f.shared, "chatId": f.chat}),
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401}, def: 501},
		{method: "POST", path: "/api/core/chat/fork", body: jsonBody(map[string]any{"appId": f.shared, "chatId": f.chat, "contentId": f.chat + "/00000000"}),
			want: map[string]int{anonymous: 401, wrongKey: 401, userNoCSRF: 403, adminToken: 401, adminBasic: 401}, def: 501},

		{method: "GET", path: "/api/me", want: userRead, def: 200},
		{method: "GET", path: "/api/apps", want: userRead, def: 200},
		{method: "POST", path: "/api/apps", body: appBody("new", false), want: userWrite, def: 201},
		{method: "GET", path: "/api/apps/" + f.shared, want: userRead, def: 200},
		{method: "GET", path: "/api/apps/" + f.private, want: with(userRead, map[string]int{userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "PUT", path: "/api/apps/" + f.shared, body: appBody("shared", true),
			want: with(userWrite, map[string]int{userSession: 403, userKey: 403, otherUser: 403}), def: 200},
		{method: "PUT", path: "/api/apps/" + f.private, body: appBody("private", false),
			want: with(userWrite, map[string]int{userSession: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "PATCH", path: "/api/apps/" + f.shared, body: jsonBody(map[string]any{"terminalOff": false}),
			want: with(userWrite, map[string]int{userSession: 403, userKey: 403, otherUser: 403}), def: 200},
		{method: "GET", path: "/api/apps/" + f.shared + "/chats", want: with(userRead, map[string]int{appKey: 200, appKeyOther: 404}), def: 200},
		{method: "GET", path: "/api/apps/" + f.private + "/chats", want: with(userRead, map[string]int{userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404, appKey: 404, appKeyOther: 200}), def: 200},
		{method: "GET", path: chatPath, want: chatRead, def: 200},
		{method: "PATCH", path: chatPath, body: jsonBody(map[string]any{"title": "renamed"}), want: chatWrite, def: 200},
		{method: "DELETE", path: "/api/apps/:appId/chats", pathFor: func(f *fixture, t *testing.T, caller string) string {
			return "/api/apps/" + f.shared + "/chats"
		}, body: func(f *fixture, caller string) any {
			return map[string]any{"chatIds": []string{f.fresh[caller]}, "userId": f.carol}
		}, want: chatWrite, def: 202},
		// A workflow as a file: the app's owner and admins export it; every
		// account imports one (here FastGPT's) as an app of its own.
		{method: "GET", path: "/api/apps/" + f.shared + "/export", want: publishRead, def: 200},
		{method: "GET", path: "/api/apps/" + f.private + "/export", want: with(userRead, map[string]int{userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "POST", path: "/api/apps/import", body: jsonBody(map[string]any{"name": "imported", "workflow": map[string]any{
			"nodes": []map[string]any{
				{"nodeId": "448745", "name": "Start", "flowNodeType": "workflowStart", "inputs": []any{}, "outputs": []any{}},
				{"nodeId": "reply", "name": "Reply", "flowNodeType": "answerNode", "outputs": []any{},
					"inputs": []map[string]any{{"key": "text", "renderTypeList": []string{"textarea", "reference"}, "value": "Hi"}}}},
			"edges": []map[string]any{{"source": "448745", "target": "reply", "sourceHandle": "448745-source-right"}}}}),
			want: userWrite, def: 201},
		// An app's versions: its owner and admins.
		{method: "GET", path: "/api/apps/" + f.shared + "/versions", want: publishRead, def: 200},
		{method: "GET", path: "/api/apps/" + f.private + "/versions", want: with(userRead, map[string]int{userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "POST", path: "/api/apps/" + f.shared + "/versions", body: jsonBody(map[string]any{"note": "from the table"}), want: publishWrite, def: 201},
		{method: "GET", path: "/api/apps/" + f.shared + "/versions/" + f.version, want: publishRead, def: 200},
		{method: "POST", path: "/api/apps/" + f.shared + "/versions/" + f.version + "/rollback", want: publishWrite, def: 200},
		{method: "DELETE", path: "/api/apps/:appId", pathFor: func(f *fixture, t *testing.T, caller string) string {
			return "/api/apps/" + f.createApp(t, "doomed", false)
		}, want: with(userWrite, map[string]int{userSession: 404, userKey: 404, otherUser: 404}), def: 202},

		// The sandbox's files (F1–F3).
		{method: "POST", path: "/api/core/ai/sandbox/file", body: file("list", nil), want: with(chatRead, map[string]int{userNoCSRF: 403}), def: 200},
		{method: "POST", path: "/api/core/ai/sandbox/file", body: file("read", map[string]any{"path": "ready.txt"}), want: with(chatRead, map[string]int{userNoCSRF: 403}), def: 200},
		{method: "POST", path: "/api/core/ai/sandbox/file", body: file("write", map[string]any{"path": "notes.txt", "content": "x"}), want: chatWrite, def: 200},
		{method: "POST", path: "/api/core/ai/sandbox/download", body: file("", nil), want: with(chatRead, map[string]int{userNoCSRF: 403}), def: 200},
		{method: "POST", path: "/api/core/ai/sandbox/status", body: file("", nil), want: with(chatRead, map[string]int{userNoCSRF: 403}), def: 200},
		{method: "POST", path: "/api/core/ai/sandbox/processes", body: file("list", nil), want: with(chatRead, map[string]int{userNoCSRF: 403}), def: 200},
		{method: "POST", path: "/api/core/ai/sandbox/previews", body: file("list", nil), want: with(chatRead, map[string]int{userNoCSRF: 403}), def: 200},
		// The terminal: its owner and admins get to the WebSocket's
		// handshake (426 to a request that is none).
		{method: "GET", path: "/api/core/ai/sandbox/terminal?appId=" + f.shared + "&chatId=" + f.chat + "&userId=" + f.carol, want: with(chatWrite, map[string]int{userNoCSRF: http.StatusUpgradeRequired, wrongCSRF: http.StatusUpgradeRequired}), def: http.StatusUpgradeRequired},
		// Preview links: the token is the credential (web/preview_test.go).
		{method: "GET", path: "/preview/no-such-token", open: true, want: public, def: 404},
		{method: "GET", path: "/preview/no-such-token/page", open: true, want: public, def: 404},

		// The chat's uploads (K2): as its files; a new chat's first upload
		// creates it.
		{method: "POST", path: "/api/uploads/" + f.chat + "?appId=" + f.shared + "&userId=" + f.carol, upload: true, body: func(*fixture, string) any { return []byte("x") },
			want: chatWrite, def: 201},
		{method: "GET", path: "/api/uploads/" + f.chat + "/files?appId=" + f.shared + "&userId=" + f.carol, want: chatRead, def: 200},
		{method: "DELETE", path: "/api/uploads/:chatId/files", pathFor: func(f *fixture, t *testing.T, caller string) string {
			r := upload(t, f.clients[adminSession], "/api/uploads/"+f.chat+"?appId="+f.shared+"&userId="+f.carol, part{"doomed.txt", []byte("x")})
			var u uploaded
			r.JSON(t, &u)
			if r.Status != 201 || len(u.Files) != 1 {
				t.Fatalf("upload a file to delete: %d %s", r.Status, r.Body)
			}
			return "/api/uploads/" + f.chat + "/files?appId=" + f.shared + "&userId=" + f.carol + "&path=" + url.QueryEscape(u.Files[0].Name)
		}, want: chatWrite, def: 200},

		// The skills (K4): admins install and manage them, builders list
		// them to choose an app's.
		{method: "GET", path: "/admin/skills", want: adminOnly, def: 200},
		{method: "GET", path: "/admin/mcp", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/skills", body: func(*fixture, string) any { return f.skillZip }, want: adminOnly, def: 201},
		{method: "GET", path: "/admin/api/skills", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/skills/examples/csv-analyzer", want: adminOnly, def: 201},
		{method: "POST", path: "/admin/api/skills/examples/no-such-example", want: adminOnly, def: 404},
		{method: "GET", path: "/admin/api/skills/markdown-report", want: adminOnly, def: 200},
		{method: "DELETE", path: "/admin/api/skills/no-such-skill", want: adminOnly, def: 404},
		{method: "GET", path: "/api/skills", want: userRead, def: 200},
		{method: "GET", path: "/api/node-templates", want: userRead, def: 200},

		// MCP servers: admins register them, builders choose them.
		{method: "GET", path: "/admin/api/mcp-servers", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/mcp-servers", body: func(_ *fixture, caller string) any {
			id := strings.Trim(strings.NewReplacer(" ", "-", ",", "", "'", "", "_", "-").Replace(strings.ToLower(caller)), "-")
			return map[string]any{"id": id[:min(len(id), 30)], "name": caller, "transport": "http", "url": "http://127.0.0.1:1/mcp", "token": "secret"}
		}, want: adminOnly, def: 201},
		{method: "PUT", path: "/admin/api/mcp-servers/fx", body: jsonBody(map[string]any{"name": "fixture", "transport": "stdio", "command": []string{"/workspace/mcp"}}),
			want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/mcp-servers/fx/refresh", want: adminOnly, def: 400},
		{method: "DELETE", path: "/admin/api/mcp-servers/no-such-server", want: adminOnly, def: 404},
		{method: "GET", path: "/api/tools", want: userRead, def: 200},

		// Pages: anonymous visitors are sent to sign in.
		{method: "GET", path: "/", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303}), def: 200},
		{method: "GET", path: "/apps/" + f.shared + "/chats", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303}), def: 200},
		{method: "GET", path: "/apps/" + f.shared + "/edit", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303, userSession: 403, userNoCSRF: 403, userKey: 403, otherUser: 403}), def: 200},
		{method: "GET", path: "/apps/" + f.private + "/edit", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303, userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "GET", path: "/apps/" + f.shared + "/flow", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303, userSession: 403, userNoCSRF: 403, userKey: 403, otherUser: 403}), def: 200},
		{method: "GET", path: "/apps/" + f.private + "/flow", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303, userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "GET", path: "/apps/" + f.shared + "/chat/" + f.chat + "?userId=" + f.carol, want: with(chatRead, map[string]int{anonymous: 303, adminBasic: 303, appKey: 403, appKeyOther: 403}), def: 200},
		{method: "GET", path: "/account", want: with(userRead, map[string]int{anonymous: 303, adminBasic: 303}), def: 200},

		// Admins.
		{method: "GET", path: "/admin", want: adminOnly, def: 200},
		{method: "GET", path: "/admin/users", want: adminOnly, def: 200},
		{method: "GET", path: web.QueuesPath + "/api/queues", want: adminOnly, def: 200},
		{method: "GET", path: "/admin/api/sandboxes/metrics", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/sandboxes/" + f.sandboxID + "/stop", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/sandboxes/" + f.victim + "/delete", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/sandboxes/0000000000000000/stop", want: adminOnly, def: 404},
		{method: "POST", path: "/admin/api/sandboxes/not-an-id/stop", want: adminOnly, def: 400},

		// Accounts: admins manage users; every user their own password and
		// keys. The password row sends a wrong old password: it reaches the
		// check and changes nothing.
		{method: "GET", path: "/admin/api/users", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/users", body: func(_ *fixture, caller string) any {
			return map[string]any{"name": "made-by-" + strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(caller), "password": "long enough"}
		}, want: adminOnly, def: 201},
		{method: "POST", path: "/admin/api/users/" + f.dave + "/disable", want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/users/" + f.dave + "/enable", want: adminOnly, def: 200},
		{method: "DELETE", path: "/admin/api/users/:userId", pathFor: func(f *fixture, t *testing.T, caller string) string {
			return "/admin/api/users/" + f.env.CreateUser(t, "doomed-"+strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(caller), auth.RoleUser)
		}, want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/users/" + f.dave + "/password", body: jsonBody(map[string]any{"password": "reset by an admin"}), want: adminOnly, def: 200},
		{method: "POST", path: "/admin/api/users", body: func(_ *fixture, caller string) any {
			return map[string]any{"name": "invited-by-" + strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(caller), "invite": true}
		}, want: adminOnly, def: 201},
		{method: "POST", path: "/admin/api/users/" + f.dave + "/password", body: jsonBody(map[string]any{"invite": true}), want: adminOnly, def: 200},
		// Set-password links: the link's token is the only credential.
		{method: "GET", path: "/set-password/:token", pathFor: func(f *fixture, t *testing.T, _ string) string {
			link, err := f.env.Engine.Accounts.IssuePasswordLink(t.Context(), f.dave)
			if err != nil {
				t.Fatal(err)
			}
			return account.SetPasswordPath(link.Token)
		}, open: true, want: public, def: 200},
		{method: "GET", path: "/set-password/:token", pathFor: func(*fixture, *testing.T, string) string { return "/set-password/fbp_not-a-link" },
			open: true, want: public, def: 404},
		{method: "POST", path: "/api/set-password", body: func(f *fixture, _ string) any {
			link, _ := f.env.Engine.Accounts.IssuePasswordLink(context.Background(), f.dave)
			return map[string]any{"token": link.Token, "password": "chosen by dave"}
		}, open: true, want: public, def: 200},
		{method: "POST", path: "/api/set-password", body: jsonBody(map[string]any{"token": "fbp_not-a-link", "password": "chosen by dave"}),
			open: true, want: public, def: 404},
		{method: "POST", path: "/api/me/password", body: jsonBody(map[string]any{"oldPassword": "not the password", "newPassword": "whatever it is"}), want: userWrite, def: 403},
		{method: "GET", path: "/api/keys", want: userRead, def: 200},
		{method: "POST", path: "/api/keys", body: jsonBody(map[string]any{"name": "from the table"}), want: userWrite, def: 201},
		{method: "DELETE", path: "/api/keys/no-such-key", want: userWrite, def: 404},

		// Publishing: the app's keys and share links.
		{method: "GET", path: "/api/apps/" + f.shared + "/keys", want: publishRead, def: 200},
		{method: "POST", path: "/api/apps/" + f.shared + "/keys", body: jsonBody(map[string]any{"name": "from the table"}), want: publishWrite, def: 201},
		{method: "DELETE", path: "/api/apps/" + f.shared + "/keys/no-such-key", want: publishWrite, def: 404},
		{method: "GET", path: "/api/apps/" + f.shared + "/links", want: publishRead, def: 200},
		{method: "POST", path: "/api/apps/" + f.shared + "/links", body: jsonBody(map[string]any{"name": "from the table"}), want: publishWrite, def: 201},
		{method: "DELETE", path: "/api/apps/" + f.shared + "/links/no-such-link", want: publishWrite, def: 404},
		// The audit: an app's records to its owner and admins, every
		// record, its export and its page to admins.
		{method: "GET", path: "/api/apps/" + f.shared + "/audit", want: publishRead, def: 200},
		{method: "POST", path: "/api/apps/" + f.shared + "/nodes/start/run", body: jsonBody(map[string]any{"question": "from the table"}), want: publishWrite, def: 200},
		{method: "GET", path: "/api/apps/" + f.private + "/audit", want: with(userRead, map[string]int{userSession: 404, userNoCSRF: 404, userKey: 404, otherUser: 404}), def: 200},
		{method: "GET", path: "/admin/audit", want: adminOnly, def: 200},
		{method: "GET", path: "/admin/api/audit", want: adminOnly, def: 200},
		{method: "GET", path: "/admin/api/audit/export", want: adminOnly, def: 200},

		// The sandbox service API: keys (personal and app) and sessions;
		// a session is its maker's alone, missing to everyone else.
		{method: "GET", path: "/api/sandbox/v1/openapi.json", open: true, want: public, def: 200},
		{method: "GET", path: "/api/sandbox/v1/tools", want: sbRead, def: 200},
		{method: "GET", path: "/api/sandbox/v1/sessions", want: sbRead, def: 200},
		{method: "POST", path: "/api/sandbox/v1/sessions", body: jsonBody(map[string]any{"name": "from the table"}), want: sbWrite, def: 201},
		{method: "POST", path: "/api/sandbox/v1/execute", body: jsonBody(map[string]any{"tool": "skill:list"}), want: sbWrite, def: 200},
		{method: "POST", path: "/api/sandbox/v1/warmup", body: jsonBody(map[string]any{"count": 1}), want: sbWrite, def: 201},
		{method: "GET", path: "/api/sandbox/v1/sessions/:id", pathFor: carolSession(""), want: carolsRead, def: 404},
		{method: "DELETE", path: "/api/sandbox/v1/sessions/:id", pathFor: carolSession(""), want: carolsWrite(202), def: 404},
		{method: "POST", path: "/api/sandbox/v1/sessions/:id/execute", pathFor: carolSession("/execute"),
			body: jsonBody(map[string]any{"tool": "file:list"}), want: carolsWrite(200), def: 404},
		{method: "GET", path: "/api/sandbox/v1/sessions/:id/files", pathFor: carolSession("/files?path=/workspace"), want: carolsRead, def: 404},
		// A new session's sandbox has not run: carol reaches the route
		// and hears it uses nothing.
		{method: "GET", path: "/api/sandbox/v1/sessions/:id/metrics", pathFor: carolSession("/metrics"),
			want: with(carolsRead, map[string]int{userSession: 409, userNoCSRF: 409, userKey: 409}), def: 404},
		// Snapshots (R3): this engine keeps none, which carol hears.
		{method: "POST", path: "/api/sandbox/v1/sessions/:id/snapshots", pathFor: carolSession("/snapshots"),
			body: jsonBody(map[string]any{"name": "s1"}), want: carolsWrite(501), def: 404},
		{method: "GET", path: "/api/sandbox/v1/sessions/:id/snapshots", pathFor: carolSession("/snapshots"),
			want: with(carolsRead, map[string]int{userSession: 501, userNoCSRF: 501, userKey: 501}), def: 404},
		{method: "DELETE", path: "/api/sandbox/v1/sessions/:id/snapshots/:name", pathFor: carolSession("/snapshots/s1"), want: carolsWrite(501), def: 404},
		{method: "PUT", path: "/api/sandbox/v1/sessions/:id/files", pathFor: carolSession("/files?path=/workspace/up.txt"),
			body: func(*fixture, string) any { return []byte("x") }, want: carolsWrite(201), def: 404},
		// The MCP server is stateless: POST only, from an MCP client (which
		// accepts JSON and event streams; TestSandboxMCP is one), so
		// carol's plain request passes the gate and is refused by it.
		{method: "POST", path: "/api/sandbox/v1/sessions/:id/mcp", pathFor: carolSession("/mcp"), body: jsonBody(map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{}}), want: carolsWrite(400), def: 404},
		{method: "GET", path: "/api/sandbox/v1/sessions/:id/mcp", pathFor: carolSession("/mcp"), want: with(carolsRead, map[string]int{userSession: 405, userNoCSRF: 405, userKey: 405}), def: 404},
		{method: "DELETE", path: "/api/sandbox/v1/sessions/:id/mcp", pathFor: carolSession("/mcp"), want: carolsWrite(405), def: 404},

		// Share links: the visitor's chat is theirs alone; without a
		// visitor session (every other caller) the API refuses, and an
		// expired link refuses everyone.
		// The chat API names the caller's own chats only: another visitor
		// sending the first one's chat id talks in a chat of their own.
		{method: "POST", path: shareAPI + "/v1/chat/completions", open: true, body: func(f *fixture, caller string) any {
			return map[string]any{"chatId": f.visited, "messages": []map[string]string{{"role": "user", "content": "hello from " + caller}}}
		}, want: map[string]int{linkVisitor: 200, visitorOther: 200}, def: 401},
		// The other visitor's row above made a chat of their own under
		// that id: they stop nothing of the first visitor's.
		{method: "POST", path: shareAPI + "/v1/chat/stop", open: true, body: jsonBody(map[string]any{"chatId": f.visited}),
			want: map[string]int{linkVisitor: 200, visitorOther: 200}, def: 401},
		{method: "POST", path: shareAPI + "/v1/chat/stop", open: true, body: jsonBody(map[string]any{"chatId": "never-visited"}),
			want: map[string]int{linkVisitor: 404, visitorOther: 404}, def: 401},
		{method: "POST", path: shareAPI + "/core/chat/item/delete", open: true, body: jsonBody(map[string]any{"chatId": f.visited, "contentId": f.visited + "/00000000"}),
			want: map[string]int{linkVisitor: 501, visitorOther: 501}, def: 401},
		{method: "POST", path: shareAPI + "/core/chat/item/redo", open: true, body: jsonBody(map[string]any{"chatId": f.visited}),
			want: map[string]int{linkVisitor: 501, visitorOther: 501}, def: 401},
		{method: "POST", path: shareAPI + "/core/ai/sandbox/file", open: true, body: visitorFile("read", map[string]any{"path": "visitor.txt"}), want: visitorOnly, def: 401},
		{method: "POST", path: shareAPI + "/core/ai/sandbox/file", open: true, body: visitorFile("write", map[string]any{"path": "visitor.txt", "content": "x"}), want: visitorOnly, def: 401},
		{method: "POST", path: shareAPI + "/core/ai/sandbox/download", open: true, body: visitorFile("", nil), want: visitorOnly, def: 401},
		{method: "POST", path: shareAPI + "/core/ai/sandbox/status", open: true, body: visitorFile("", nil), want: visitorOnly, def: 401},
		{method: "POST", path: shareAPI + "/core/ai/sandbox/processes", open: true, body: visitorFile("list", nil), want: visitorOnly, def: 401},
		{method: "POST", path: shareAPI + "/core/ai/sandbox/previews", open: true, body: visitorFile("list", nil), want: visitorOnly, def: 401},
		// The fixture's link opens no terminals.
		{method: "GET", path: shareAPI + "/core/ai/sandbox/terminal?appId=" + f.shared + "&chatId=" + f.visited + "&userId=" + url.QueryEscape(f.visitorID), open: true,
			want: map[string]int{linkVisitor: 403, visitorOther: 404}, def: 401},
		{method: "POST", path: shareAPI + "/uploads/" + f.visited + "?appId=" + f.shared + "&userId=" + url.QueryEscape(f.visitorID), open: true, upload: true,
			body: func(*fixture, string) any { return []byte("x") }, want: map[string]int{linkVisitor: 201, visitorOther: 404}, def: 401},
		{method: "GET", path: shareAPI + "/uploads/" + f.visited + "/files?appId=" + f.shared + "&userId=" + url.QueryEscape(f.visitorID), open: true, want: visitorOnly, def: 401},
		{method: "DELETE", path: shareAPI + "/uploads/" + f.visited + "/files?appId=" + f.shared + "&userId=" + url.QueryEscape(f.visitorID) + "&path=" + url.QueryEscape("from "+linkVisitor+".txt"), open: true,
			want: map[string]int{linkVisitor: 200, visitorOther: 404}, def: 401},
		{method: "GET", path: "/share/" + f.expired, open: true, want: public, def: 410},
		{method: "POST", path: "/share/" + f.expired + "/api/v1/chat/completions", open: true, body: jsonBody(map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}}), want: public, def: 410},
		// The pages give a caller without a visitor session one (a cookie
		// and a redirect), so they come after the API rows, and the
		// callers that share carol's cookies are left out of the first.
		{method: "GET", path: "/share/" + f.link + "/chat/" + f.visited + "?userId=" + url.QueryEscape(f.visitorID), open: true, want: visitorOnly, def: 303,
			only: slices.DeleteFunc(slices.Clone(callers), func(c string) bool { return c == userNoCSRF || c == wrongCSRF })},
		// Switching identity takes the current session's CSRF token in
		// the form: without it every caller (each has a visitor session
		// of the link after the row above) is refused.
		{method: "POST", path: "/share/" + f.link + "/switch", open: true, want: public, def: 403},
		{method: "GET", path: "/share/:linkId", pathFor: func(f *fixture, t *testing.T, _ string) string {
			return "/share/" + newLink(t, f.clients[appOwner], f.shared, map[string]any{"name": "unvisited"}).ID
		}, open: true, want: public, def: 303},

		// Last: it ends the sessions.
		{method: "POST", path: "/api/logout", want: userWrite, def: 200},
	}
}

// TestRouteAccess sends every route as every caller and checks the
// status. A route added to the router without a row here fails the test.
func TestRouteAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rows := f.routes()
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.method+" "+pattern(f, r.path)] = true
		for _, caller := range callers {
			if r.only != nil && !slices.Contains(r.only, caller) {
				continue
			}
			path := r.path
			if r.pathFor != nil {
				path = r.pathFor(f, t, caller)
			}
			as := like(caller, path)
			want, ok := r.want[as]
			if as == forged && !r.open {
				want, ok = http.StatusUnauthorized, true
			}
			if !ok {
				want = r.def
			}
			var body any
			if r.body != nil {
				body = r.body(f, caller)
			}
			var resp enginetest.Response
			if r.upload {
				resp = upload(t, f.clients[caller], path, part{"from " + caller + ".txt", body.([]byte)})
			} else {
				resp = f.clients[caller].Do(t, r.method, path, body)
			}
			if resp.Status != want {
				t.Errorf("%s %s as %s: status %d, want %d (%s)", r.method, path, caller, resp.Status, want, clip(resp.Body))
			}
		}
	}
	for _, rt := range web.Routes(f.env.Engine.Handler) {
		if strings.HasPrefix(rt, "GET /ui/") || strings.HasPrefix(rt, "HEAD ") {
			continue
		}
		if strings.Contains(rt, web.QueuesPath) {
			continue // the dashboard's own routes; one row covers its gate
		}
		if strings.Contains(rt, " /preview/") && !strings.HasPrefix(rt, "GET ") {
			continue // one proxy for every method; the GET rows cover its gate
		}
		if !seen[rt] {
			t.Errorf("route %s has no row in the access table", rt)
		}
	}
}

// sessionID is a sandbox service API session's id in a path.
var sessionID = regexp.MustCompile(`ses_[a-z0-9]+`)

// pattern turns a row's concrete path back into the router's pattern.
func pattern(f *fixture, path string) string {
	r := strings.NewReplacer("/preview/no-such-token/page", "/preview/:token/*path", "/preview/no-such-token", "/preview/:token", f.version, ":versionId", f.shared, ":appId", f.private, ":appId", f.chat, ":chatId",
		f.sandboxID, ":id", f.victim, ":id", "0000000000000000", ":id", "not-an-id", ":id",
		"/users/"+f.dave+"/", "/users/:userId/", "no-such-key", ":keyId", "no-such-link", ":linkId",
		"/share/"+f.link, "/share/:linkId", "/share/"+f.expired, "/share/:linkId",
		"/chat/"+f.visited, "/chat/:chatId", "/uploads/"+f.chat, "/uploads/:chatId", "/uploads/"+f.visited, "/uploads/:chatId",
		"/skills/markdown-report", "/skills/:name", "/skills/no-such-skill", "/skills/:name",
		"/examples/csv-analyzer", "/examples/:name", "/examples/no-such-example", "/examples/:name",
		"/mcp-servers/fx", "/mcp-servers/:id", "/mcp-servers/no-such-server", "/mcp-servers/:id",
		"/nodes/start/run", "/nodes/:nodeId/run")
	p := sessionID.ReplaceAllString(r.Replace(path), ":id")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if strings.HasPrefix(p, "/apps/:appId/chat/") {
		p = "/apps/:appId/chat/:chatId"
	}
	if p == "/ui/.keep" {
		return "/ui/*filepath"
	}
	return p
}

func clip(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
