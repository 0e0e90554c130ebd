package web_test

// A chat's workspace as one ZIP (E4): the uploads and the intermediate
// files are mounts into the sandbox from the engine's host, and a ZIP or
// a listing of /workspace holds them, on every provider this machine runs;
// the skills are listed read-only and left out of ZIPs; links the sandbox
// plants in the mounts lead nowhere.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
)

// unzip reads an archive into its entries: names (directories end in
// "/") to contents.
func unzip(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a ZIP (%v): %s", err, clipped(b))
	}
	out := map[string]string{}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			out[f.Name] = ""
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("open %s: %v", f.Name, err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		out[f.Name] = string(data)
	}
	return out
}

// listEntry is an entry of the file API's listing.
type listEntry struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Type     string `json:"type"`
	ReadOnly bool   `json:"readOnly"`
}

// The bytes of the upload: not text, so that a ZIP that mangled them
// would show.
var uploadBytes = []byte("id,value\n1,\x00\xff\xfe\n")

// checkWorkspaceZip uploads a file to a chat, has the demo model write
// /workspace/intermediate/result.txt and plant links out of the mounts
// (to /etc, up with "..", to another chat's uploads on the host), then
// downloads the ZIP of /workspace and lists it.
func checkWorkspaceZip(t *testing.T, env *enginetest.Env) {
	zoeID := env.CreateUser(t, "zoe", auth.RoleUser)
	zoe := env.Login(t, "zoe", enginetest.Password("zoe"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	expect(t, admin, "POST", "/admin/api/skills/examples/csv-analyzer", nil, 201)
	app := newApp(t, zoe, "zip")

	// Another chat of the same user, whose uploads the links aim at.
	if r := upload(t, zoe, "/api/uploads/c-other?appId="+app, part{"secret.txt", []byte("another chat's secret")}); r.Status != 201 {
		t.Fatalf("upload to the other chat: %d %s", r.Status, r.Body)
	}
	other := sandbox.Scope{AppID: app, UserID: zoeID, ChatID: "c-other"}.SandboxID()

	if r := upload(t, zoe, "/api/uploads/c-zip?appId="+app, part{"data.csv", uploadBytes}); r.Status != 201 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	command := `printf 'result\n' > /workspace/intermediate/result.txt && echo mine > /workspace/notes.txt && ` +
		`ln -s /etc /workspace/intermediate/etc && ln -s /etc/passwd /workspace/intermediate/passwd && ` +
		`ln -s ../.. /workspace/uploads/up && ln -s ../../` + other + `/uploads /workspace/intermediate/neighbour`
	if _, answer := say(t, zoe, app, "c-zip", "$ "+command); !strings.Contains(answer, "` succeeded.") {
		t.Fatalf("the command failed: %s", answer)
	}

	call := func(route string, body map[string]any) enginetest.Response {
		body["appId"], body["chatId"] = app, "c-zip"
		return zoe.Do(t, "POST", "/api/core/ai/sandbox/"+route, body)
	}
	r := call("download", map[string]any{"path": "/workspace"})
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("download /workspace: %d %s: %s", r.Status, r.Header.Get("Content-Type"), clipped(r.Body))
	}
	got := unzip(t, r.Body)
	if got["workspace/uploads/data.csv"] != string(uploadBytes) {
		t.Errorf("workspace/uploads/data.csv = %q, want the uploaded %q (entries %v)", got["workspace/uploads/data.csv"], uploadBytes, keys(got))
	}
	if got["workspace/intermediate/result.txt"] != "result\n" {
		t.Errorf("workspace/intermediate/result.txt = %q, want the model's %q (entries %v)", got["workspace/intermediate/result.txt"], "result\n", keys(got))
	}
	if got["workspace/notes.txt"] != "mine\n" {
		t.Errorf("workspace/notes.txt = %q, want %q", got["workspace/notes.txt"], "mine\n")
	}
	for name, content := range got {
		if strings.HasPrefix(name, "workspace/skills") {
			t.Errorf("the ZIP holds the skills: %s", name)
		}
		if strings.Contains(content, "root:") || strings.Contains(content, "another chat's") {
			t.Errorf("%s holds what a link out of the mounts leads to: %q", name, content)
		}
		for _, seg := range strings.Split(name, "/") {
			switch seg {
			case "etc", "passwd", "up", "neighbour":
				t.Errorf("the ZIP holds a link or what it leads to: %s", name)
			}
		}
	}

	list := func(p string) ([]listEntry, enginetest.Response) {
		r := call("file", map[string]any{"action": "list", "path": p})
		var l struct {
			Files []listEntry `json:"files"`
		}
		if r.Status == 200 {
			if err := json.Unmarshal(r.Body, &l); err != nil {
				t.Fatalf("list %s: %v: %s", p, err, r.Body)
			}
		}
		return l.Files, r
	}
	root, r := list("/workspace")
	want := map[string]bool{"uploads": false, "intermediate": false, "skills": true}
	for _, e := range root {
		if ro, ok := want[e.Name]; ok {
			if e.Type != "directory" || e.ReadOnly != ro {
				t.Errorf("list /workspace: %+v, want a directory with readOnly %v", e, ro)
			}
			delete(want, e.Name)
		}
	}
	if len(want) != 0 {
		t.Errorf("list /workspace: %d %s, lacks %v", r.Status, r.Body, want)
	}
	skills, r := list("/workspace/skills")
	if len(skills) == 0 || r.Status != 200 {
		t.Errorf("list /workspace/skills: %d %s", r.Status, r.Body)
	}
	for _, e := range skills {
		if !e.ReadOnly {
			t.Errorf("list /workspace/skills: %+v, want readOnly", e)
		}
	}
	inter, _ := list("/workspace/intermediate")
	var names []string
	for _, e := range inter {
		names = append(names, e.Name+":"+e.Type)
		if e.ReadOnly {
			t.Errorf("list /workspace/intermediate: %+v is read-only", e)
		}
	}
	if strings.Join(names, " ") != "etc:symlink neighbour:symlink passwd:symlink result.txt:file" {
		t.Errorf("list /workspace/intermediate: %v", names)
	}
	for _, p := range []string{"/workspace/intermediate/etc", "/workspace/intermediate/neighbour", "/workspace/uploads/up"} {
		if l, r := list(p); r.Status != 400 || !strings.Contains(string(r.Body), "through a link") {
			t.Errorf("list %s (a link out of the mount): %d %s %v; want 400 saying it leads out", p, r.Status, clipped(r.Body), l)
		}
	}
	for _, p := range []string{"/workspace/intermediate/neighbour", "/workspace/intermediate/passwd"} {
		if r := call("download", map[string]any{"path": p}); r.Status == 200 || strings.Contains(string(r.Body), "root:") || strings.Contains(string(r.Body), "secret") {
			t.Errorf("download %s (a link out of the mount): %d %s", p, r.Status, clipped(r.Body))
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestAttackLinksInMountsLeadNowhereInZip: the ZIP and the listings of a
// chat's /workspace hold its uploads and intermediate files, on bwrap,
// and links planted in them lead nowhere.
func TestAttackLinksInMountsLeadNowhereInZip(t *testing.T) {
	t.Parallel()
	checkWorkspaceZip(t, enginetest.Start(t, enginetest.Options{}))
}

// TestWorkspaceZipDocker is the same on Docker, under runc and under
// gVisor's runsc, where the mounts are bind mounts into the container
// and the workspace directory shows empty mount points.
func TestWorkspaceZipDocker(t *testing.T) {
	for _, runtime := range []string{"", "runsc"} {
		name := "runc"
		if runtime != "" {
			name = runtime
		}
		t.Run(name, func(t *testing.T) {
			checkWorkspaceZip(t, enginetest.Start(t, enginetest.Options{Env: dockerEnv(t, runtime)}))
		})
	}
}

// dockerEnv is the configuration of an engine whose sandboxes are the
// test daemon's containers (dockertest's busybox image, the agent built
// for the tests) under runtime ("": Docker's default, runc).
func dockerEnv(t testing.TB, runtime string) map[string]string {
	t.Helper()
	cli := dockertest.Client(t)
	if runtime != "" {
		dockertest.Runtime(t, runtime)
	}
	if err := dockertest.EnsureImage(context.Background(), cli); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"FLOWBOX_SANDBOX_PROVIDER":    "docker",
		"FLOWBOX_DOCKER_HOST":         os.Getenv("DOCKER_HOST"),
		"FLOWBOX_DOCKER_IMAGE":        dockertest.Image,
		"FLOWBOX_DOCKER_SHELL":        dockertest.Shell,
		"FLOWBOX_DOCKER_RUNTIME":      runtime,
		"FLOWBOX_DOCKER_AGENT_BINARY": testenv.AgentBinary(t),
	}
}

// TestSandboxAPIWorkspaceZip: the service API's archive of /workspace
// holds a session's upload into /workspace/uploads and what a command
// wrote to /workspace/intermediate, not the skills; file:list shows the
// skills read-only (E4).
func TestSandboxAPIWorkspaceZip(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	expect(t, admin, "POST", "/admin/api/skills/examples/csv-analyzer", nil, 201)
	c := env.Bearer(env.APIKey(t, env.CreateUser(t, "sz-carol", auth.RoleUser)))
	r := c.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"name": "zip"})
	var s sessionView
	r.JSON(t, &s)
	if r.Status != 201 || s.ID == "" {
		t.Fatalf("create a session: %d %s", r.Status, r.Body)
	}
	files := "/api/sandbox/v1/sessions/" + s.ID + "/files?path="
	if r := c.Do(t, "PUT", files+"/workspace/uploads/data.csv", uploadBytes); r.Status != 201 {
		t.Fatalf("upload into uploads: %d %s", r.Status, r.Body)
	}
	if res := execute(t, c, s.ID, "shell:exec", map[string]any{"command": "printf 'result\\n' > /workspace/intermediate/result.txt"}); res.IsError {
		t.Fatalf("write the result: %+v %s", res, res.Output)
	}
	r = c.Do(t, "GET", files+"/workspace", nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("archive of /workspace: %d %s", r.Status, clipped(r.Body))
	}
	got := unzip(t, r.Body)
	if got["workspace/uploads/data.csv"] != string(uploadBytes) || got["workspace/intermediate/result.txt"] != "result\n" {
		t.Errorf("archive of /workspace: uploads/data.csv %q, intermediate/result.txt %q; entries %v", got["workspace/uploads/data.csv"], got["workspace/intermediate/result.txt"], keys(got))
	}
	for name := range got {
		if strings.HasPrefix(name, "workspace/skills") {
			t.Errorf("the archive holds the skills: %s", name)
		}
	}

	for _, tc := range []struct {
		path     string
		name     string
		readOnly bool
	}{
		{"/workspace", "skills", true},
		{"/workspace", "intermediate", false},
		{"/workspace/skills", "csv-analyzer", true},
		{"/workspace/uploads", "data.csv", false},
	} {
		res := execute(t, c, s.ID, "file:list", map[string]any{"path": tc.path})
		var list struct {
			Entries []listEntry `json:"entries"`
		}
		if err := json.Unmarshal(res.Output, &list); err != nil || res.IsError {
			t.Fatalf("file:list %s: %+v %s", tc.path, res, res.Output)
		}
		found := false
		for _, e := range list.Entries {
			if e.Name == tc.name {
				found = true
				if e.ReadOnly != tc.readOnly {
					t.Errorf("file:list %s: %+v, want readOnly %v", tc.path, e, tc.readOnly)
				}
			}
		}
		if !found {
			t.Errorf("file:list %s: %s lacks %s", tc.path, res.Output, tc.name)
		}
	}
}
