package web

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// testAccess: the caller is named by X-User; chats belong to their owner;
// "admin" reaches every chat.
type testAccess map[string]string // chatID → owner

func (a testAccess) ChatOwner(ctx context.Context, c *gin.Context, appID, chatID string, write bool) (string, error) {
	owner, ok := a[chatID]
	who := c.GetHeader("X-User")
	if !ok || (who != owner && who != "admin") {
		return "", ErrNoAccess
	}
	return owner, nil
}

type filesEnv struct {
	srv     *httptest.Server
	manager *sandbox.Manager
	store   *mongostore.Store
}

func newFilesEnv(t *testing.T) *filesEnv {
	t.Helper()
	sb := newSandboxes(t, nil)
	store, m := sb.store, sb.manager
	h := &FilesHandler{Sandboxes: m, Access: testAccess{"c1": "alice", "fresh": "alice"}, MaxRead: 1000, MaxWrite: 2000}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/api/core/ai/sandbox/file", h.File)
	r.POST("/api/core/ai/sandbox/download", h.Download)
	r.POST("/api/core/ai/sandbox/status", h.Status)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	for _, chat := range []string{"c1", "fresh"} {
		id := sandbox.IDFor("app", "alice", chat)
		t.Cleanup(func() { m.Delete(context.Background(), id) })
	}
	return &filesEnv{srv: srv, manager: m, store: store}
}

func (e *filesEnv) call(t *testing.T, route, user, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/core/ai/sandbox/"+route, strings.NewReader(body))
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (e *filesEnv) shell(t *testing.T, command string) {
	t.Helper()
	res, err := e.manager.Exec(context.Background(), sandbox.Scope{AppID: "app", UserID: "alice", ChatID: "c1"}, sandbox.ExecRequest{Command: command})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %+v %v", command, res, err)
	}
}

func TestFileActions(t *testing.T) {
	e := newFilesEnv(t)
	e.shell(t, `mkdir -p src/pkg && echo 'package main' > src/main.go && echo inner > src/pkg/lib.go && printf 'bin\000ary' > blob.bin && head -c 1500 /dev/zero | tr '\0' a > big.txt && ln -s / rootlink && mkfifo pipe`)
	tests := []struct {
		name, user, body string
		status           int
		want             string
	}{
		{"list", "alice", `{"action":"list","appId":"app","chatId":"c1","path":"/workspace"}`, 200, `"name":"src","path":"/workspace/src","type":"directory"`},
		{"list relative", "alice", `{"action":"list","appId":"app","chatId":"c1","path":"src"}`, 200, `"path":"/workspace/src/main.go","type":"file","size":13`},
		{"read", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"/workspace/src/main.go"}`, 200, `{"action":"read","content":"package main\n"}`},
		{"admin reads", "admin", `{"action":"read","appId":"app","chatId":"c1","path":"src/pkg/lib.go"}`, 200, `"content":"inner\n"`},
		{"write", "alice", `{"action":"write","appId":"app","chatId":"c1","path":"/workspace/notes/new.md","content":"# hi"}`, 200, `{"action":"write","success":true}`},
		{"binary", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"blob.bin"}`, 415, "binary file"},
		{"too big to read", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"big.txt"}`, 413, "download it instead"},
		{"too big to write", "alice", `{"action":"write","appId":"app","chatId":"c1","path":"w.txt","content":"` + strings.Repeat("x", 2500) + `"}`, 413, "limit is 2000"},
		{"dot dot", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"../../etc/passwd"}`, 400, `is not allowed; give a path inside /workspace`},
		{"absolute outside", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"/etc/passwd"}`, 400, "outside /workspace"},
		{"encoded dot dot", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"%2e%2e/%2e%2e/etc/passwd"}`, 404, "not found"},
		{"escaped in JSON", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"\u002e\u002e/etc/passwd"}`, 400, `is not allowed; give a path inside /workspace`},
		{"through a link to /", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"rootlink/etc/passwd"}`, 400, "outside /workspace through a link"},
		{"write through a link", "alice", `{"action":"write","appId":"app","chatId":"c1","path":"rootlink/tmp/x","content":"x"}`, 400, "through a link"},
		{"fifo", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"pipe"}`, 400, "not a regular file"},
		{"missing", "alice", `{"action":"read","appId":"app","chatId":"c1","path":"nope.txt"}`, 404, "not found"},
		{"bad action", "alice", `{"action":"delete","appId":"app","chatId":"c1","path":"x"}`, 400, "use list, read or write"},
		{"malformed", "alice", `{"action":`, 400, "not valid JSON"},
		{"no chat", "alice", `{"action":"list","appId":"app","path":"/"}`, 400, "appId and chatId are required"},
		{"another user", "mallory", `{"action":"list","appId":"app","chatId":"c1","path":"/workspace"}`, 404, `no chat \"c1\"`},
		{"unknown chat", "alice", `{"action":"list","appId":"app","chatId":"zzz","path":"/workspace"}`, 404, `no chat \"zzz\"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.call(t, "file", tc.user, tc.body)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("got %d %s\nwant %d containing %s", status, body, tc.status, tc.want)
			}
		})
	}
	e.shell(t, `test "$(cat notes/new.md)" = "# hi"`)
}

func TestDownloadZipOfNestedFolders(t *testing.T) {
	e := newFilesEnv(t)
	e.shell(t, `mkdir -p proj/a/b/c && echo top > proj/top.txt && echo deep > proj/a/b/c/deep.txt && printf '\001\002' > proj/a/bin`)
	status, body := e.call(t, "download", "alice", `{"appId":"app","chatId":"c1","path":"/workspace/proj"}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
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
	status, body = e.call(t, "download", "alice", `{"appId":"app","chatId":"c1","path":"proj/top.txt"}`)
	if status != 200 || string(body) != "top\n" {
		t.Fatalf("file download: %d %q", status, body)
	}
	if status, _ := e.call(t, "download", "mallory", `{"appId":"app","chatId":"c1","path":"proj"}`); status != 404 {
		t.Fatalf("another user's download: %d, want 404", status)
	}
}

// TestFilesOfADeletedChat: once a chat's deletion is recorded, its files
// answer 410 Gone with a clear message, not "retry later", and the
// sandbox is not created again.
func TestFilesOfADeletedChat(t *testing.T) {
	e := newFilesEnv(t)
	e.shell(t, "echo kept > note.txt")
	if err := e.store.RequestDeletions(context.Background(), []mongostore.Deletion{mongostore.ChatDeletion("app", "c1", "task-1", time.Now())}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"action":"list","appId":"app","chatId":"c1","path":"/workspace"}`,
		`{"action":"read","appId":"app","chatId":"c1","path":"note.txt"}`,
	} {
		status, got := e.call(t, "file", "alice", body)
		if status != http.StatusGone || !strings.Contains(string(got), "was deleted") {
			t.Errorf("%s: %d %s, want 410 saying the chat was deleted", body, status, got)
		}
	}
	if status, got := e.call(t, "download", "alice", `{"appId":"app","chatId":"c1","path":"/workspace"}`); status != http.StatusGone {
		t.Errorf("download: %d %s, want 410", status, got)
	}
}

func TestStatusDoesNotCreate(t *testing.T) {
	e := newFilesEnv(t)
	status, body := e.call(t, "status", "alice", `{"appId":"app","chatId":"fresh"}`)
	if status != 200 || string(body) != `{"exists":false}` {
		t.Fatalf("status of a chat without a sandbox: %d %s", status, body)
	}
	if _, err := e.manager.Lookup(context.Background(), sandbox.Scope{AppID: "app", UserID: "alice", ChatID: "fresh"}); err == nil {
		t.Fatal("asking for the status created a sandbox")
	}
	e.call(t, "file", "alice", `{"action":"list","appId":"app","chatId":"fresh","path":"/workspace"}`)
	status, body = e.call(t, "status", "alice", `{"appId":"app","chatId":"fresh"}`)
	var got struct {
		Exists bool
		Status string
	}
	json.Unmarshal(body, &got)
	if status != 200 || !got.Exists || got.Status != "running" {
		t.Fatalf("after opening the files: %d %s, want a running sandbox (S2)", status, body)
	}
}
