package web_test

// The workspace through the product (K1–K3): users upload files to a
// chat, list and delete them, attach them to messages; names are
// sanitised, quotas hold, and whoever may not reach the chat cannot reach
// its files.

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// part is one file of an upload.
type part struct {
	name    string
	content []byte
}

// upload posts files as multipart/form-data to the upload API at path.
func upload(t *testing.T, c *enginetest.Client, path string, files ...part) enginetest.Response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range files {
		h := textproto.MIMEHeader{}
		// Written by hand so that names the standard library would
		// clean reach the server as an attacker would send them.
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, strings.ReplaceAll(f.name, `"`, `\"`)))
		h.Set("Content-Type", "application/octet-stream")
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(f.content)
	}
	mw.Close()
	cc := *c
	cc.Header = c.Header.Clone()
	if cc.Header == nil {
		cc.Header = http.Header{}
	}
	cc.Header.Set("Content-Type", mw.FormDataContentType())
	return cc.Do(t, "POST", path, body.Bytes())
}

type uploaded struct {
	ChatID string
	Files  []struct {
		Name, Path, SandboxPath string
		Size                    int64
	}
	Message string
}

func uploadedNames(t *testing.T, r enginetest.Response) []string {
	t.Helper()
	var u uploaded
	r.JSON(t, &u)
	var out []string
	for _, f := range u.Files {
		out = append(out, f.Name)
	}
	return out
}

func listUploads(t *testing.T, c *enginetest.Client, app, chat, area string) []string {
	t.Helper()
	var l struct {
		Files []struct {
			Name  string
			Size  int64
			IsDir bool
		}
	}
	expect(t, c, "GET", "/api/uploads/"+chat+"/files?appId="+app+"&area="+area, nil, 200).JSON(t, &l)
	var out []string
	for _, f := range l.Files {
		out = append(out, fmt.Sprintf("%s:%d", f.Name, f.Size))
	}
	return out
}

func TestUploads(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_UPLOAD_MAX_FILE_MIB": "1", "FLOWBOX_UPLOAD_MAX_CHAT_MIB": "2"}})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	app := newApp(t, alice, "files")
	base := "/api/uploads/c-files?appId=" + app

	// A chat that does not exist yet is created by its first upload, and
	// listed before any message.
	r := expect(t, alice, "POST", base, nil, 415)
	if !strings.Contains(string(r.Body), "multipart/form-data") {
		t.Errorf("a JSON body: %s", r.Body)
	}
	r = upload(t, alice, base, part{"data.csv", []byte("a,b\n1,2\n")})
	if r.Status != 201 {
		t.Fatalf("first upload: %d %s", r.Status, r.Body)
	}
	var chats struct {
		Chats []struct{ ChatID, Title string }
	}
	expect(t, alice, "GET", "/api/apps/"+app+"/chats", nil, 200).JSON(t, &chats)
	if len(chats.Chats) != 1 || chats.Chats[0].ChatID != "c-files" || chats.Chats[0].Title != "data.csv" {
		t.Errorf("chats after the upload: %+v, want c-files titled data.csv", chats.Chats)
	}

	// Names: cleaned, numbered on collision, never a path.
	for _, tc := range []struct {
		name, want string
		status     int
	}{
		{"data.csv", "data (1).csv", 201},
		{"报告 2026.csv", "报告 2026.csv", 201},
		{"tab\there.txt", "tab_here.txt", 201},
		{"trailing. . ", "trailing", 201},
		{strings.Repeat("é", 150) + ".txt", "", 201}, // 304 bytes: cut to 255, extension kept
		{"..", "", 400},
		{".", "", 400},
		{`a\b`, "", 400},
		{"../x", "x", 201}, // the multipart reader keeps the last element
		{"/etc/passwd", "passwd", 201},
	} {
		r := upload(t, alice, base, part{tc.name, []byte("x")})
		if r.Status != tc.status {
			t.Errorf("upload %q: %d %s, want %d", tc.name, r.Status, clip(r.Body), tc.status)
			continue
		}
		if tc.status != 201 {
			continue
		}
		got := uploadedNames(t, r)
		switch {
		case len(got) != 1:
			t.Errorf("upload %q stored %v", tc.name, got)
		case tc.want != "" && got[0] != tc.want:
			t.Errorf("upload %q stored as %q, want %q", tc.name, got[0], tc.want)
		case tc.want == "" && (len(got[0]) > 255 || !utf8.ValidString(got[0]) || !strings.HasSuffix(got[0], ".txt")):
			t.Errorf("long name stored as %q (%d bytes)", got[0], len(got[0]))
		}
	}
	files := listUploads(t, alice, app, "c-files", "uploads")
	for _, want := range []string{"data.csv:8", "data (1).csv:1", "报告 2026.csv:1", "x:1", "passwd:1"} {
		if !slices.Contains(files, want) {
			t.Errorf("uploads %v lack %s", files, want)
		}
	}

	// Quotas: 1 MiB a file exactly fits, a byte more is refused and
	// nothing is left; the chat's 2 MiB hold across files.
	mib := bytes.Repeat([]byte("z"), 1<<20)
	r = upload(t, alice, base, part{"big.bin", append(mib, 'z')})
	if r.Status != 413 || !strings.Contains(string(r.Body), "big.bin") || !strings.Contains(string(r.Body), "limit per file") {
		t.Errorf("a file over the limit: %d %s", r.Status, clip(r.Body))
	}
	if files := listUploads(t, alice, app, "c-files", "uploads"); slices.ContainsFunc(files, func(s string) bool { return strings.HasPrefix(s, "big") }) {
		t.Errorf("a refused upload left %v", files)
	}
	if r := upload(t, alice, base, part{"one.bin", mib}); r.Status != 201 {
		t.Errorf("a file of exactly the limit: %d %s", r.Status, clip(r.Body))
	}
	r = upload(t, alice, base, part{"two.bin", mib})
	if r.Status != 413 || !strings.Contains(string(r.Body), "not enough space in this chat") {
		t.Errorf("past the chat's quota: %d %s", r.Status, clip(r.Body))
	}
	expect(t, alice, "DELETE", "/api/uploads/c-files/files?appId="+app+"&path=one.bin", nil, 200)
	if r := upload(t, alice, base, part{"two.bin", mib}); r.Status != 201 {
		t.Errorf("after a delete made room: %d %s", r.Status, clip(r.Body))
	}
	expect(t, alice, "DELETE", "/api/uploads/c-files/files?appId="+app+"&path=two.bin", nil, 200)
	expect(t, alice, "DELETE", "/api/uploads/c-files/files?appId="+app+"&path=two.bin", nil, 404)
	expect(t, alice, "DELETE", "/api/uploads/c-files/files?appId="+app+"&path=../../etc/passwd", nil, 400)

	// Concurrent uploads of one name: every file kept, each its own name.
	var wg sync.WaitGroup
	results := make([]enginetest.Response, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = upload(t, alice, "/api/uploads/c-race?appId="+app, part{"same.txt", []byte(fmt.Sprint(i))})
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range results {
		if r.Status != 201 {
			t.Fatalf("concurrent upload: %d %s", r.Status, r.Body)
		}
		seen[uploadedNames(t, r)[0]] = true
	}
	if len(seen) != 8 {
		t.Errorf("8 concurrent uploads of one name stored under %d names: %v", len(seen), seen)
	}

	// Another user reaches neither the chat's files nor its creation.
	if r := upload(t, bob, base, part{"evil.txt", []byte("x")}); r.Status != 404 {
		t.Errorf("bob uploading to alice's chat: %d %s", r.Status, r.Body)
	}
	expect(t, bob, "GET", "/api/uploads/c-files/files?appId="+app, nil, 404)
	expect(t, bob, "DELETE", "/api/uploads/c-files/files?appId="+app+"&path=data.csv", nil, 404)
	expect(t, alice, "GET", "/api/uploads/c-files/files?appId="+app+"&area=etc", nil, 400)

	// A message attaches uploaded files by name; an unknown one is refused.
	body := func(parts ...map[string]any) map[string]any {
		return map[string]any{"appId": app, "chatId": "c-files", "messages": []map[string]any{{"role": "user", "content": parts}}}
	}
	text := map[string]any{"type": "text", "text": "$ wc -c < /workspace/uploads/data.csv"}
	r = expect(t, alice, "POST", "/api/v1/chat/completions", body(text, map[string]any{"type": "file_url", "name": "nope.csv", "url": "x"}), 400)
	if !strings.Contains(string(r.Body), "nope.csv") || !strings.Contains(string(r.Body), "upload it first") {
		t.Errorf("an unknown attachment: %s", r.Body)
	}
	_, answer := sendTurn(t, alice, "/api/v1/chat/completions", body(text, map[string]any{"type": "file_url", "name": "data.csv", "url": "x"}), 200)
	if !strings.Contains(answer, "8") {
		t.Errorf("the sandbox does not see the upload: %q", answer)
	}
	var chat struct{ Items []struct{ Role, Text string } }
	expect(t, alice, "GET", "/api/apps/"+app+"/chats/c-files", nil, 200).JSON(t, &chat)
	if len(chat.Items) == 0 || !strings.Contains(chat.Items[0].Text, "Attached files: /workspace/uploads/data.csv (8 B)") {
		t.Errorf("the stored question does not name its attachment: %+v", chat.Items)
	}
	expect(t, alice, "GET", "/api/apps/"+app+"/chats", nil, 200).JSON(t, &chats)
	if len(chats.Chats) == 0 || !strings.HasPrefix(chats.Chats[len(chats.Chats)-1].Title, "$ wc") && !strings.HasPrefix(chats.Chats[0].Title, "$ wc") {
		t.Errorf("the chat made by an upload is not titled after its first question: %+v", chats.Chats)
	}

	// What the agent writes to /workspace/intermediate is listed there
	// and downloaded through the file API; the skills are read-only.
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app, "chatId": "c-files",
		"messages": message("$ echo result > /workspace/intermediate/out.txt")}, 200)
	_, answer = sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app, "chatId": "c-files",
		"messages": message("$ touch /workspace/skills/x 2>&1; echo exit=$?")}, 200)
	if !strings.Contains(answer, "exit=1") || !strings.Contains(strings.ToLower(answer), "read-only") {
		t.Errorf("a write into /workspace/skills inside the sandbox: %q, want it refused as read-only", answer)
	}
	if files := listUploads(t, alice, app, "c-files", "intermediate"); !slices.Contains(files, "out.txt:7") {
		t.Errorf("intermediate files %v, want out.txt", files)
	}
	dl := expect(t, alice, "POST", "/api/core/ai/sandbox/download", map[string]any{"appId": app, "chatId": "c-files", "path": "/workspace/intermediate/out.txt"}, 200)
	if string(dl.Body) != "result\n" {
		t.Errorf("download of the intermediate file: %q", dl.Body)
	}
	r = expect(t, alice, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "write", "appId": app, "chatId": "c-files", "path": "/workspace/skills/x", "content": "x"}, 403)
	if !strings.Contains(string(r.Body), "read-only") {
		t.Errorf("a write into the skills: %s", r.Body)
	}
	q := url.Values{"appId": {app}}
	if r := alice.Do(t, "GET", "/api/uploads/c-files/files?"+q.Encode()+"&dir=../..", nil); r.Status != 400 {
		t.Errorf("listing outside uploads: %d %s", r.Status, r.Body)
	}
}
