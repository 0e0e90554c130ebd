package readfiles_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/readfiles"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

func engine(t *testing.T, cfg readfiles.Config) *nodes.Engine {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	types := nodes.Builtins(nil)
	types[readfiles.Type] = readfiles.New(cfg)
	return &nodes.Engine{Templates: ts, Types: types}
}

func graph(t *testing.T, names []string) *nodes.Graph {
	t.Helper()
	if names == nil {
		names = []string{}
	}
	list, _ := json.Marshal(names)
	js := `{"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"read","type":"readFiles","inputs":{"fileUrlList":` + string(list) + `}},
		{"nodeId":"answer","type":"answerNode","inputs":{"text":"{{$read.system_text$}}"}}],
		"edges":[{"source":"start","target":"read"},{"source":"read","target":"answer"}]}`
	var g nodes.Graph
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func TestReadFiles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, err := workspace.New(workspace.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	chat := sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "c1"}
	other := sandbox.Scope{AppID: "app", UserID: "u2", ChatID: "c1"}
	upload := func(scope sandbox.Scope, dir, name, content string) {
		t.Helper()
		if _, err := store.Save(ctx, scope, dir, name, strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
	}
	upload(chat, "", "a.txt", "\ufeffhello")
	upload(chat, "notes", "b.md", "# 标题\nline")
	upload(chat, "", "photo.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	upload(chat, "", "report.pdf", "%PDF-1.4 ...")
	upload(chat, "", "latin1.txt", "caf\xe9")
	upload(other, "", "secret.txt", "the other user's secret")
	// What the chat's sandbox may plant in its uploads: links out of them.
	uploads := filepath.Join(root, "chats", chat.SandboxID(), "uploads")
	if err := os.Symlink("/etc/passwd", filepath.Join(uploads, "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../"+other.SandboxID()+"/uploads/secret.txt", filepath.Join(uploads, "theirs.txt")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		cfg   readfiles.Config
		chat  sandbox.Scope
		files []string
		want  string // the whole text
	}{
		{name: "every upload", chat: chat, want: "File: notes/b.md\n<Content>\n# 标题\nline\n</Content>" +
			"\n******\nFile: a.txt\n<Content>\nhello\n</Content>" +
			"\n******\nFile: latin1.txt\n<Skipped>not UTF-8 text (text/plain): this node reads UTF-8 text files only</Skipped>" +
			"\n******\nFile: passwd\n<Skipped>it cannot be read: open /workspace/uploads/passwd: invalid path: it leads outside /workspace/uploads through a link</Skipped>" +
			"\n******\nFile: photo.png\n<Skipped>not a text file (image/png)</Skipped>" +
			"\n******\nFile: report.pdf\n<Skipped>a PDF, not a text file: this node reads text files only; convert it to text first (for example in the sandbox, with a tool-call node)</Skipped>" +
			"\n******\nFile: theirs.txt\n<Skipped>it cannot be read: open /workspace/uploads/theirs.txt: invalid path: it leads outside /workspace/uploads through a link</Skipped>"},
		{name: "chosen files", chat: chat, files: []string{"/workspace/uploads/notes/b.md", "a.txt", "ghost.txt", "../" + other.SandboxID() + "/uploads/secret.txt"},
			want: "File: notes/b.md\n<Content>\n# 标题\nline\n</Content>" +
				"\n******\nFile: a.txt\n<Content>\nhello\n</Content>" +
				"\n******\nFile: ghost.txt\n<Skipped>no file of that name is uploaded to this chat</Skipped>" +
				"\n******\nFile: ../" + other.SandboxID() + "/uploads/secret.txt\n<Skipped>no file of that name is uploaded to this chat</Skipped>"},
		{name: "bounded text", cfg: readfiles.Config{MaxTextBytes: 12}, chat: chat, files: []string{"b.md", "a.txt"},
			want: "File: notes/b.md\n<Content>\n# 标题\nlin\n</Content>\n(only the first 12 of 13 bytes)" +
				"\n******\nFile: a.txt\n<Skipped>the node's text limit of 12 B is reached</Skipped>"},
		{name: "bounded files", cfg: readfiles.Config{MaxFiles: 1}, chat: chat, files: []string{"a.txt", "b.md"},
			want: "File: a.txt\n<Content>\nhello\n</Content>\n******\nFile: notes/b.md\n<Skipped>the node reads at most 1 files</Skipped>"},
		{name: "another user's chat of the same id", chat: other, want: "File: secret.txt\n<Content>\nthe other user's secret\n</Content>"},
		{name: "a chat without uploads", chat: sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "empty"}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Uploads = store
			res, err := engine(t, tc.cfg).Run(ctx, graph(t, tc.files), nodes.Chat{AppID: tc.chat.AppID, UserID: tc.chat.UserID, ChatID: tc.chat.ChatID}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed != "" || res.Answer != tc.want {
				t.Fatalf("failed %q, text:\n%s\nwant:\n%s", res.Failed, res.Answer, tc.want)
			}
		})
	}
}
