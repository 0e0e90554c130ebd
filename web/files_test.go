package web_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// The file API's limits when files.Handler's are not set, as the product
// builds it (web/files/files.go).
const (
	defaultMaxRead  = 1 << 20
	defaultMaxWrite = 1 << 20
)

// filesEnv is the product with owen's public app, alice's chat in it, a
// signed-in admin, and mallory, who may use the app but not alice's chat.
// Owen, as the app's owner, may read alice's chat but not change it.
type filesEnv struct {
	env                         *enginetest.Env
	alice, owen, admin, mallory *enginetest.Client
	aliceID, app, chat          string
}

func newFilesEnv(t *testing.T) *filesEnv {
	t.Helper()
	env := enginetest.Start(t, enginetest.Options{})
	e := &filesEnv{env: env, aliceID: env.CreateUser(t, "alice", auth.RoleUser)}
	env.CreateUser(t, "owen", auth.RoleUser)
	env.CreateUser(t, "mallory", auth.RoleUser)
	e.alice = env.Login(t, "alice", enginetest.Password("alice"))
	e.owen = env.Login(t, "owen", enginetest.Password("owen"))
	e.admin = env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	e.mallory = env.Login(t, "mallory", enginetest.Password("mallory"))
	resp := e.owen.Do(t, "POST", "/api/apps", map[string]any{"name": "owen's", "public": true, "graph": apps.DemoGraph()})
	var app struct {
		ID string `json:"appId"`
	}
	resp.JSON(t, &app)
	if resp.Status != http.StatusCreated || app.ID == "" {
		t.Fatalf("create owen's app: %d %s", resp.Status, resp.Body)
	}
	e.app = app.ID
	e.chat, _ = say(t, e.alice, e.app, "", "hello")
	return e
}

// call posts body, a JSON object with "appId", "chatId" and "userId" of
// alice's chat added, to the sandbox route as c. Chat ids are scoped per
// app and user: without userId, each caller would name a chat of their own.
func (e *filesEnv) call(t *testing.T, c *enginetest.Client, route string, body map[string]any) enginetest.Response {
	t.Helper()
	b := map[string]any{"appId": e.app, "chatId": e.chat, "userId": e.aliceID}
	for k, v := range body {
		b[k] = v
	}
	return c.Do(t, "POST", "/api/core/ai/sandbox/"+route, b)
}

// shell runs command in alice's chat, as a turn of the demo model, and
// fails unless it succeeds.
func (e *filesEnv) shell(t *testing.T, command string) {
	t.Helper()
	_, answer := say(t, e.alice, e.app, e.chat, "$ "+command)
	if !strings.Contains(answer, "` succeeded.") {
		t.Fatalf("%s: %s", command, answer)
	}
}

func TestFileActions(t *testing.T) {
	t.Parallel()
	e := newFilesEnv(t)
	e.shell(t, `mkdir -p src/pkg && echo 'package main' > src/main.go && echo inner > src/pkg/lib.go && printf 'bin\000ary' > blob.bin && head -c `+itoa(defaultMaxRead+1)+` /dev/zero | tr '\0' a > big.txt && ln -s / rootlink && mkfifo pipe`)
	type body = map[string]any
	tests := []struct {
		name   string
		as     *enginetest.Client
		body   any
		status int
		want   string
	}{
		{"list", e.alice, body{"action": "list", "path": "/workspace"}, 200, `"name":"src","path":"/workspace/src","type":"directory"`},
		{"list relative", e.alice, body{"action": "list", "path": "src"}, 200, `"path":"/workspace/src/main.go","type":"file","size":13`},
		{"read", e.alice, body{"action": "read", "path": "/workspace/src/main.go"}, 200, `{"action":"read","content":"package main\n"}`},
		{"admin reads", e.admin, body{"action": "read", "path": "src/pkg/lib.go"}, 200, `"content":"inner\n"`},
		{"the app's owner reads", e.owen, body{"action": "read", "path": "src/main.go"}, 200, `"content":"package main\n"`},
		{"the app's owner lists", e.owen, body{"action": "list", "path": "src"}, 200, `"path":"/workspace/src/main.go"`},
		{"the app's owner may not write", e.owen, body{"action": "write", "path": "owen.txt", "content": "x"}, 404, "no chat " + quoted(e.chat)},
		{"write", e.alice, body{"action": "write", "path": "/workspace/notes/new.md", "content": "# hi"}, 200, `{"action":"write","success":true}`},
		{"admin writes", e.admin, body{"action": "write", "path": "notes/admin.md", "content": "ok"}, 200, `{"action":"write","success":true}`},
		{"binary", e.alice, body{"action": "read", "path": "blob.bin"}, 415, "binary file"},
		{"too big to read", e.alice, body{"action": "read", "path": "big.txt"}, 413, "download it instead"},
		{"too big to write", e.alice, body{"action": "write", "path": "w.txt", "content": strings.Repeat("x", defaultMaxWrite+1)}, 413, "limit is " + itoa(defaultMaxWrite)},
		{"body too big", e.alice, body{"action": "write", "path": "w.txt", "content": strings.Repeat("x", defaultMaxWrite+64<<10)}, 413, "the request body is over"},
		{"dot dot", e.alice, body{"action": "read", "path": "../../etc/passwd"}, 400, `is not allowed; give a path inside /workspace`},
		{"absolute outside", e.alice, body{"action": "read", "path": "/etc/passwd"}, 400, "outside /workspace"},
		{"encoded dot dot", e.alice, body{"action": "read", "path": "%2e%2e/%2e%2e/etc/passwd"}, 404, "not found"},
		{"escaped in JSON", e.alice, []byte(`{"action":"read","appId":"` + e.app + `","chatId":"` + e.chat + `","path":"\u002e\u002e/etc/passwd"}`), 400, `is not allowed; give a path inside /workspace`},
		{"through a link to /", e.alice, body{"action": "read", "path": "rootlink/etc/passwd"}, 400, "outside /workspace through a link"},
		{"write through a link", e.alice, body{"action": "write", "path": "rootlink/tmp/x", "content": "x"}, 400, "through a link"},
		{"fifo", e.alice, body{"action": "read", "path": "pipe"}, 400, "not a regular file"},
		{"missing", e.alice, body{"action": "read", "path": "nope.txt"}, 404, "not found"},
		{"bad action", e.alice, body{"action": "delete", "path": "x"}, 400, "use list, read or write"},
		{"malformed", e.alice, []byte(`{"action":`), 400, "not valid JSON"},
		{"no chat", e.alice, []byte(`{"action":"list","appId":"` + e.app + `","path":"/"}`), 400, "appId and chatId are required"},
		{"another user", e.mallory, body{"action": "list", "path": "/workspace"}, 404, "no chat " + quoted(e.chat)},
		{"another user writes", e.mallory, body{"action": "write", "path": "x.txt", "content": "x"}, 404, "no chat " + quoted(e.chat)},
		{"unknown app", e.alice, body{"action": "list", "appId": "nope", "chatId": "zzz", "path": "/workspace"}, 404, "no chat " + quoted("zzz")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var resp enginetest.Response
			if b, ok := tc.body.(body); ok {
				resp = e.call(t, tc.as, "file", b)
			} else {
				resp = tc.as.Do(t, "POST", "/api/core/ai/sandbox/file", tc.body)
			}
			if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.want) {
				t.Fatalf("got %d %s\nwant %d containing %s", resp.Status, clipped(resp.Body), tc.status, tc.want)
			}
		})
	}
	e.shell(t, `test "$(cat notes/new.md)" = "# hi" && test "$(cat notes/admin.md)" = ok && test ! -e w.txt && test ! -e x.txt && test ! -e owen.txt`)
}

func TestDownloadZipOfNestedFolders(t *testing.T) {
	t.Parallel()
	e := newFilesEnv(t)
	e.shell(t, `mkdir -p proj/a/b/c && echo top > proj/top.txt && echo deep > proj/a/b/c/deep.txt && printf '\001\002' > proj/a/bin`)
	for _, as := range []struct {
		name string
		c    *enginetest.Client
	}{{"the chat's owner", e.alice}, {"the app's owner", e.owen}, {"admin", e.admin}} {
		t.Run(as.name, func(t *testing.T) {
			resp := e.call(t, as.c, "download", map[string]any{"path": "/workspace/proj"})
			if resp.Status != 200 || resp.Header.Get("Content-Type") != "application/zip" {
				t.Fatalf("status %d, %s: %s", resp.Status, resp.Header.Get("Content-Type"), clipped(resp.Body))
			}
			zr, err := zip.NewReader(bytes.NewReader(resp.Body), int64(len(resp.Body)))
			if err != nil {
				t.Fatalf("not a ZIP: %v", err)
			}
			got := map[string]string{}
			var names []string
			for _, f := range zr.File {
				names = append(names, f.Name)
				if !f.FileInfo().IsDir() {
					rc, _ := f.Open()
					b, _ := io.ReadAll(rc)
					rc.Close()
					got[f.Name] = string(b)
				}
			}
			sort.Strings(names)
			want := []string{"proj/", "proj/a/", "proj/a/b/", "proj/a/b/c/", "proj/a/b/c/deep.txt", "proj/a/bin", "proj/top.txt"}
			if strings.Join(names, " ") != strings.Join(want, " ") {
				t.Fatalf("entries %v, want %v", names, want)
			}
			if got["proj/a/b/c/deep.txt"] != "deep\n" || got["proj/top.txt"] != "top\n" || got["proj/a/bin"] != "\x01\x02" {
				t.Fatalf("contents %q", got)
			}
		})
	}
	resp := e.call(t, e.alice, "download", map[string]any{"path": "proj/top.txt"})
	if resp.Status != 200 || string(resp.Body) != "top\n" {
		t.Fatalf("file download: %d %q", resp.Status, resp.Body)
	}
	if resp := e.call(t, e.mallory, "download", map[string]any{"path": "proj"}); resp.Status != 404 || !strings.Contains(string(resp.Body), "no chat") {
		t.Fatalf("another user's download: %d %s, want 404", resp.Status, clipped(resp.Body))
	}
}

// TestFilesOfADeletedChat: once a chat's deletion is recorded, its files
// answer 410 Gone with a clear message, not "retry later". The workers do
// not run here, so the sandbox is still there to be found.
func TestFilesOfADeletedChat(t *testing.T) {
	t.Parallel()
	e := newFilesEnv(t)
	e.shell(t, "echo kept > note.txt")
	if resp := e.alice.Do(t, "DELETE", "/api/apps/"+e.app+"/chats", map[string]any{"chatIds": []string{e.chat}}); resp.Status != http.StatusAccepted {
		t.Fatalf("delete the chat: %d %s", resp.Status, resp.Body)
	}
	for _, body := range []map[string]any{
		{"action": "list", "path": "/workspace"},
		{"action": "read", "path": "note.txt"},
		{"action": "write", "path": "note.txt", "content": "back"},
	} {
		resp := e.call(t, e.alice, "file", body)
		if resp.Status != http.StatusGone || !strings.Contains(string(resp.Body), "was deleted") {
			t.Errorf("%v: %d %s, want 410 saying the chat was deleted", body, resp.Status, resp.Body)
		}
	}
	if resp := e.call(t, e.alice, "download", map[string]any{"path": "/workspace"}); resp.Status != http.StatusGone {
		t.Errorf("download: %d %s, want 410", resp.Status, clipped(resp.Body))
	}
	// Another user's chat is known by its record, which went with it.
	if resp := e.call(t, e.admin, "file", map[string]any{"action": "list", "path": "/workspace"}); resp.Status != http.StatusNotFound {
		t.Errorf("an admin's list: %d %s, want 404", resp.Status, resp.Body)
	}
}

func TestStatusDoesNotCreate(t *testing.T) {
	t.Parallel()
	e := newFilesEnv(t)
	scope := sandbox.Scope{AppID: e.app, UserID: e.aliceID, ChatID: e.chat}
	for _, c := range []*enginetest.Client{e.alice, e.owen, e.admin} {
		resp := e.call(t, c, "status", nil)
		if resp.Status != 200 || string(resp.Body) != `{"exists":false}` {
			t.Fatalf("status of a chat without a sandbox: %d %s", resp.Status, resp.Body)
		}
	}
	if resp := e.call(t, e.mallory, "status", nil); resp.Status != 404 || !strings.Contains(string(resp.Body), "no chat "+quoted(e.chat)) {
		t.Fatalf("another user's status: %d %s, want 404", resp.Status, resp.Body)
	}
	if _, err := e.env.Engine.Services.Manager.Lookup(context.Background(), scope); err == nil {
		t.Fatal("asking for the status created a sandbox")
	}
	if resp := e.call(t, e.alice, "file", map[string]any{"action": "list", "path": "/workspace"}); resp.Status != 200 {
		t.Fatalf("open the files: %d %s", resp.Status, resp.Body)
	}
	resp := e.call(t, e.admin, "status", nil)
	var got struct {
		Exists bool
		Status string
	}
	_ = json.Unmarshal(resp.Body, &got)
	if resp.Status != 200 || !got.Exists || got.Status != string(sandbox.StatusRunning) {
		t.Fatalf("after opening the files: %d %s, want a running sandbox (S2)", resp.Status, resp.Body)
	}
	if _, err := e.env.Engine.Services.Manager.Lookup(context.Background(), scope); err != nil {
		t.Fatalf("the sandbox the files opened is not alice's chat's: %v", err)
	}
}
