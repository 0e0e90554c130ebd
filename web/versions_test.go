package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes"
)

// answers is a graph whose answer is text: which graph ran is the answer.
func answers(t *testing.T, text string) nodes.Graph {
	t.Helper()
	b, _ := json.Marshal(text)
	var g nodes.Graph
	if err := json.Unmarshal([]byte(`{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"say","type":"answerNode","inputs":{"text":`+string(b)+`}}],
		"edges":[{"source":"start","target":"say"}]}`), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// versionedTurn sends a message to the chat API and returns the answer and
// the version the answer says ran.
func versionedTurn(t *testing.T, c *enginetest.Client, path string, body map[string]any, want int) (chatID, answer, versionID string) {
	t.Helper()
	if body["messages"] == nil {
		body["messages"] = message("which version?")
	}
	resp := expect(t, c, "POST", path, body, want)
	if want != http.StatusOK {
		return "", string(resp.Body), ""
	}
	var out struct {
		ID        string
		VersionID *string `json:"versionId"`
		Choices   []struct{ Message struct{ Content string } }
	}
	resp.JSON(t, &out)
	if len(out.Choices) == 0 || out.VersionID == nil {
		t.Fatalf("no answer or no versionId in %s", resp.Body)
	}
	return out.ID, out.Choices[0].Message.Content, *out.VersionID
}

type versionJSON struct {
	VersionID string       `json:"versionId"`
	AppID     string       `json:"appId"`
	Number    int          `json:"number"`
	Note      string       `json:"note"`
	Author    string       `json:"author"`
	Published bool         `json:"published"`
	Graph     *nodes.Graph `json:"graph"`
}

// TestPublishedVersionsRun: chats through app keys, share links and
// sessions run the published version while the owner edits the draft; the
// owner and admins run the draft on request, nobody else may; the chat
// records which version answered; rollback; the versions go with the app.
func TestPublishedVersionsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := enginetest.Start(t, enginetest.Options{})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)

	var app struct {
		ID                 string `json:"appId"`
		PublishedVersionID string `json:"publishedVersionId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "versioned", "public": true, "graph": answers(t, "answer one")}, 201).JSON(t, &app)
	versions := "/api/apps/" + app.ID + "/versions"
	key := keyFor(t, env, alice, app.ID)
	site := newLink(t, alice, app.ID, map[string]any{"name": "site"})
	visitor := visit(t, env, "/share/"+site.ID)
	visitorAPI := "/share/" + site.ID + "/api/v1/chat/completions"

	// Before any publish the draft runs, as it always did.
	if _, answer, v := versionedTurn(t, key, completions, map[string]any{}, 200); answer != "answer one" || v != "" {
		t.Fatalf("before publishing: %q from version %q, want the draft's answer", answer, v)
	}

	// Only the owner and admins publish.
	expect(t, bob, "POST", versions, map[string]any{"note": "bob's"}, 403)
	expect(t, alice, "POST", versions, map[string]any{"note": strings.Repeat("x", apps.MaxNoteLength+1)}, 400)
	expect(t, alice, "POST", versions, []byte(`{"note":`), 400)
	var v1 versionJSON
	expect(t, alice, "POST", versions, map[string]any{"note": "first release"}, 201).JSON(t, &v1)
	if v1.Number != 1 || v1.Note != "first release" || v1.Author != aliceID || !v1.Published || v1.AppID != app.ID || v1.Graph != nil {
		t.Fatalf("published %+v", v1)
	}
	expect(t, alice, "GET", "/api/apps/"+app.ID, nil, 200).JSON(t, &app)
	if app.PublishedVersionID != v1.VersionID {
		t.Fatalf("the app's publishedVersionId %q, want %q", app.PublishedVersionID, v1.VersionID)
	}

	// The owner edits the draft: keys, links and plain chats still run
	// the published version.
	two := answers(t, "draft two")
	two.Variables = []nodes.Variable{{Key: "tone", Type: "string", Label: "Tone"}}
	expect(t, alice, "PUT", "/api/apps/"+app.ID, map[string]any{"name": "versioned", "public": true, "graph": two}, 200)
	runs := []struct {
		who  string
		c    *enginetest.Client
		path string
	}{{"app key", key, completions}, {"share-link visitor", visitor, visitorAPI}, {"alice", alice, completions}, {"bob", bob, completions}}
	var keyChat string
	for _, r := range runs {
		chatID, answer, v := versionedTurn(t, r.c, r.path, map[string]any{"appId": app.ID}, 200)
		if answer != "answer one" || v != v1.VersionID {
			t.Errorf("%s: %q from version %q, want the published %q from %s", r.who, answer, v, "answer one", v1.VersionID)
		}
		if r.c == key {
			keyChat = chatID
		}
	}
	// The chat records the version in its history.
	items, err := env.Engine.Chats.Items(ctx, chatOf(t, env, app.ID, keyChat), 0, 10)
	if err != nil || len(items) != 2 || items[1].VersionID != v1.VersionID || items[0].VersionID != "" {
		t.Fatalf("the key's chat items %+v (%v), want the answer recorded with version %s", items, err, v1.VersionID)
	}
	var stored struct {
		Items []struct {
			Role      string `json:"role"`
			VersionID string `json:"versionId"`
		} `json:"items"`
	}
	aliceChat, _, _ := versionedTurn(t, alice, completions, map[string]any{"appId": app.ID}, 200)
	expect(t, alice, "GET", "/api/apps/"+app.ID+"/chats/"+aliceChat, nil, 200).JSON(t, &stored)
	if len(stored.Items) != 2 || stored.Items[1].VersionID != v1.VersionID {
		t.Fatalf("the chat API's items %+v, want the answer's versionId %s", stored.Items, v1.VersionID)
	}

	// The chat page asks for the variables of the graph the chat runs:
	// none yet, the draft's variable is not published.
	chatPage := "/apps/" + app.ID + "/chat/" + aliceChat
	if data := readPageData(t, string(expect(t, alice, "GET", chatPage, nil, 200).Body)); len(data.Variables) != 0 {
		t.Errorf("the chat page asks for the draft's variables %+v before they are published", data.Variables)
	}

	// The draft on request: its owner and admins only.
	for who, c := range map[string]*enginetest.Client{"alice": alice, "admin": admin} {
		if _, answer, v := versionedTurn(t, c, completions, map[string]any{"appId": app.ID, "draft": true}, 200); answer != "draft two" || v != "" {
			t.Errorf("%s with draft: %q from version %q, want the draft's answer", who, answer, v)
		}
	}
	refusals := []struct {
		who  string
		c    *enginetest.Client
		path string
		body map[string]any
	}{
		{"bob", bob, completions, map[string]any{"appId": app.ID}},
		{"the app key", key, completions, map[string]any{}},
		{"a share-link visitor", visitor, visitorAPI, map[string]any{}},
		{"the service key", env.Bearer(enginetest.ServiceKey), completions, map[string]any{"appId": app.ID, "customUid": "prog"}},
	}
	for _, r := range refusals {
		r.body["draft"] = true
		if _, body, _ := versionedTurn(t, r.c, r.path, r.body, 403); !strings.Contains(body, "only the app's owner and admins may run its draft") {
			t.Errorf("%s with draft: %s, want the refusal", r.who, body)
		}
	}

	// A stream with detail names the version beside the node responses.
	resp := chatAPIPost(t, ctx, key, `{"stream":true,"detail":true,"messages":[{"role":"user","content":"hi"}]}`)
	var version string
	chatAPIReadSSE(t, resp.Body, func(ev sseEvent) bool {
		if ev.name == "appVersion" {
			version = ev.data
		}
		return true
	})
	if want := `{"versionId":"` + v1.VersionID + `"}`; version != want {
		t.Fatalf("appVersion event %q, want %s", version, want)
	}

	// A second version; the list, newest first; one version with its graph.
	var v2 versionJSON
	expect(t, alice, "POST", versions, nil, 201).JSON(t, &v2)
	if _, answer, v := versionedTurn(t, key, completions, map[string]any{}, 200); answer != "draft two" || v != v2.VersionID {
		t.Fatalf("after the second publish the key ran %q from %q, want draft two from %s", answer, v, v2.VersionID)
	}
	if data := readPageData(t, string(expect(t, alice, "GET", chatPage, nil, 200).Body)); len(data.Variables) != 1 || data.Variables[0].Key != "tone" {
		t.Errorf("the chat page asks for the variables %+v, want the published version's tone", data.Variables)
	}
	var list struct {
		List      []versionJSON `json:"list"`
		Total     int           `json:"total"`
		Published string        `json:"publishedVersionId"`
	}
	expect(t, alice, "GET", versions, nil, 200).JSON(t, &list)
	if list.Total != 2 || len(list.List) != 2 || list.List[0].VersionID != v2.VersionID || !list.List[0].Published || list.List[1].Published ||
		list.List[0].Graph != nil || list.Published != v2.VersionID {
		t.Fatalf("versions %+v", list)
	}
	expect(t, admin, "GET", versions+"?offset=1&pageSize=1", nil, 200).JSON(t, &list)
	if len(list.List) != 1 || list.List[0].VersionID != v1.VersionID {
		t.Fatalf("the second page %+v, want version 1", list.List)
	}
	expect(t, alice, "GET", versions+"?pageSize=0", nil, 400)
	expect(t, bob, "GET", versions, nil, 403)
	var got versionJSON
	expect(t, alice, "GET", versions+"/"+v1.VersionID, nil, 200).JSON(t, &got)
	if got.Graph == nil || len(got.Graph.Nodes) != 2 || !strings.Contains(string(got.Graph.Nodes[1].Inputs["text"]), "answer one") || got.Published {
		t.Fatalf("version 1 read back: %+v", got)
	}
	expect(t, alice, "GET", versions+"/"+app.ID+"-v9", nil, 404)
	expect(t, bob, "GET", versions+"/"+v1.VersionID, nil, 403)

	// Rollback: version 1 becomes the draft; the key still runs version
	// 2 until the draft is published, or at once with publish.
	expect(t, bob, "POST", versions+"/"+v1.VersionID+"/rollback", nil, 403)
	expect(t, alice, "POST", versions+"/"+v1.VersionID+"/rollback", nil, 200).JSON(t, &app)
	if app.PublishedVersionID != v2.VersionID {
		t.Fatalf("after rolling the draft back the published version is %s, want still %s", app.PublishedVersionID, v2.VersionID)
	}
	if _, answer, _ := versionedTurn(t, alice, completions, map[string]any{"appId": app.ID, "draft": true}, 200); answer != "answer one" {
		t.Fatalf("the draft after the rollback answers %q, want version 1's", answer)
	}
	if _, answer, _ := versionedTurn(t, key, completions, map[string]any{}, 200); answer != "draft two" {
		t.Fatalf("the key after a rollback of the draft ran %q, want version 2's", answer)
	}
	expect(t, alice, "POST", versions+"/"+v1.VersionID+"/rollback", map[string]any{"publish": true}, 200).JSON(t, &app)
	if _, answer, v := versionedTurn(t, key, completions, map[string]any{}, 200); answer != "answer one" || v != v1.VersionID || app.PublishedVersionID != v1.VersionID {
		t.Fatalf("after a rollback with publish the key ran %q from %q, want answer one from %s", answer, v, v1.VersionID)
	}

	// Deleting the app deletes its versions.
	expect(t, alice, "DELETE", "/api/apps/"+app.ID, nil, 202)
	if _, err := env.Engine.Apps.Version(ctx, app.ID, v1.VersionID); !errors.Is(err, apps.ErrVersionNotFound) {
		t.Fatalf("a deleted app's version: %v, want ErrVersionNotFound", err)
	}
	n, err := env.Engine.Services.DB.Collection(apps.VersionsCollection).CountDocuments(ctx, bson.D{{Key: "appId", Value: app.ID}})
	if err != nil || n != 0 {
		t.Fatalf("%d versions of the deleted app are stored (%v), want none", n, err)
	}
}

// TestRunAppThroughTheProduct: an app calls another of its owner's apps
// and answers with its published version's answer; another user's private
// app is refused.
func TestRunAppThroughTheProduct(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	create := func(c *enginetest.Client, name string, public bool, g nodes.Graph) string {
		var a struct {
			ID string `json:"appId"`
		}
		expect(t, c, "POST", "/api/apps", map[string]any{"name": name, "public": public, "graph": g}, 201).JSON(t, &a)
		return a.ID
	}
	caller := func(called string) nodes.Graph {
		var g nodes.Graph
		if err := json.Unmarshal([]byte(`{"nodes":[{"nodeId":"start","type":"workflowStart"},
			{"nodeId":"call","type":"runApp","inputs":{"app":"`+called+`","system_forbid_stream":true}},
			{"nodeId":"say","type":"answerNode","inputs":{"text":"the helper said: {{$call.answerText$}}"}}],
			"edges":[{"source":"start","target":"call"},{"source":"call","target":"say"}]}`), &g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	helper := create(alice, "helper", false, answers(t, "published help for {{$start.userChatInput$}}"))
	expect(t, alice, "POST", "/api/apps/"+helper+"/versions", map[string]any{"note": "v1"}, 201)
	expect(t, alice, "PUT", "/api/apps/"+helper, map[string]any{"name": "helper", "graph": answers(t, "draft help")}, 200)
	front := create(alice, "front", false, caller(helper))
	if _, answer := sendTurn(t, alice, completions, map[string]any{"appId": front, "messages": message("taxes")}, 200); answer != "the helper said: published help for taxes" {
		t.Fatalf("the calling app answered %q, want the helper's published answer", answer)
	}

	bobs := create(bob, "bob's own", false, answers(t, "bob's secret"))
	nosy := create(alice, "nosy", false, caller(bobs))
	resp := expect(t, alice, "POST", completions, map[string]any{"appId": nosy, "detail": true, "messages": message("hi")}, 200)
	if strings.Contains(string(resp.Body), "bob's secret") || !strings.Contains(string(resp.Body), `no app \"`+bobs+`\" that this app's owner may use`) {
		t.Fatalf("calling bob's private app: %s, want the call refused", clip(resp.Body))
	}
	// A public app of bob's is alice's to call; an admin's app calls any.
	open := create(bob, "bob's public", true, answers(t, "bob's open answer"))
	if _, answer := sendTurn(t, alice, completions, map[string]any{"appId": create(alice, "caller of public", false, caller(open)), "messages": message("hi")}, 200); answer != "the helper said: bob's open answer" {
		t.Fatalf("calling bob's public app: %q", answer)
	}
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	if _, answer := sendTurn(t, admin, completions, map[string]any{"appId": create(admin, "admin's caller", false, caller(bobs)), "messages": message("hi")}, 200); answer != "the helper said: bob's secret" {
		t.Fatalf("an admin's app calling bob's private app: %q", answer)
	}
}

// withTail is the demo graph with an answer node after the agent.
func withTail(t *testing.T, tail string) nodes.Graph {
	t.Helper()
	g := apps.DemoGraph()
	b, _ := json.Marshal(tail)
	g.Nodes = append(g.Nodes, nodes.Node{NodeID: "tail", Type: "answerNode", Inputs: map[string]json.RawMessage{"text": b}})
	g.Edges = append(g.Edges, nodes.Edge{Source: "agent", Target: "tail"})
	return g
}

// TestPausedRunResumesInItsVersion: a run that waits for an approval
// resumes in the version it paused in, whatever was published meanwhile.
func TestPausedRunResumesInItsVersion(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": policyFile(t, approvalPolicy)}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "paused", "graph": withTail(t, "tail of version 1")}, 201).JSON(t, &app)
	var v1 versionJSON
	expect(t, alice, "POST", "/api/apps/"+app.ID+"/versions", nil, 201).JSON(t, &v1)
	key := keyFor(t, env, alice, app.ID)

	tr := asks(t, key, app.ID, "", "$ rm -f nothing.txt; echo removed")
	expect(t, alice, "PUT", "/api/apps/"+app.ID, map[string]any{"name": "paused", "graph": withTail(t, "tail of version 2")}, 200)
	expect(t, alice, "POST", "/api/apps/"+app.ID+"/versions", nil, 201)

	done := completion(t, key, answerBody(app.ID, tr.ChatID, tr.Question.ApprovalID, "approve", nil))
	if !strings.Contains(done.Answer, "removed") || !strings.HasSuffix(done.Answer, "tail of version 1") {
		t.Fatalf("the resumed run answered %q, want version 1's tail", done.Answer)
	}
	items, err := env.Engine.Chats.Items(context.Background(), chatOf(t, env, app.ID, tr.ChatID), 0, 10)
	if err != nil || len(items) != 4 || items[1].VersionID != v1.VersionID || items[3].VersionID != v1.VersionID {
		t.Fatalf("items %+v (%v), want both answers recorded with version %s", items, err, v1.VersionID)
	}
	// A new message runs the version published now.
	if _, answer := sendTurn(t, key, completions, map[string]any{"chatId": tr.ChatID, "messages": message("$ echo hi")}, 200); !strings.HasSuffix(answer, "tail of version 2") {
		t.Fatalf("a new message answered %q, want version 2's tail", answer)
	}
}
