package web_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
)

// lookCmd prints the workspace's entries with their types, modes, sizes
// and contents' hashes, the uploads and intermediate files included, and
// the shell's directory and $V: what a rewind must bring back exactly.
const lookCmd = `cd /workspace && find . -path ./skills -prune -o -printf '%p %y %m %s\n' | sort; ` +
	`find . -path ./skills -prune -o -type f -print0 | sort -z | xargs -0r sha256sum; cd - >/dev/null; echo "cwd=$(pwd) V=$V"`

// TestRewind: through the chat API, on an engine with checkpoints: three
// turns create, change and delete files, uploads and intermediate files
// among them (uploaded before the chat's first turn, and between turns),
// and move the shell; regenerating
// turn 3 brings back turn 2's files and shell exactly, redo brings turn
// 3's back, editing turn 2 brings back turn 1's, and the chat goes on
// from there; a fork at turn 1 gets turn 1's sandbox, and a title that
// says it is a branch, while the original goes on; a rewind during a run
// is refused; deleting the chats deletes every checkpoint. On bwrap and
// on Docker (the product's sandbox image, with the agent).
func TestRewind(t *testing.T) {
	t.Parallel()
	t.Run("bwrap", func(t *testing.T) {
		t.Parallel()
		testRewind(t, "bwrap", map[string]string{})
	})
	t.Run("docker", func(t *testing.T) {
		t.Parallel()
		cfg := dockerEnv(t, "")
		// GNU find and sha256sum for the manifest: the product's image.
		cfg["FLOWBOX_DOCKER_IMAGE"], cfg["FLOWBOX_DOCKER_SHELL"] = dockertest.SandboxImage(t), "/bin/bash"
		testRewind(t, "docker", cfg)
	})
}

func testRewind(t *testing.T, provider string, cfg map[string]string) {
	pool := checkpointtest.Pool(t)
	cfg["FLOWBOX_CHECKPOINTS"], cfg["FLOWBOX_CHECKPOINT_POOL"] = "on", pool
	env := enginetest.Start(t, enginetest.Options{Env: cfg})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	appID := newApp(t, alice, "rewind")
	chatID := "rewind-chat"
	say := func(chat, cmd string) string {
		t.Helper()
		_, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": chat,
			"messages": []map[string]string{{"role": "user", "content": "$ " + cmd}}}, 200)
		return answer
	}
	rewind := func(chat string, seq int) map[string]any {
		t.Helper()
		var out map[string]any
		expect(t, alice, "POST", "/api/core/chat/item/delete", map[string]any{"appId": appID, "chatId": chat, "contentId": chat + "/" + pad(seq)}, 200).JSON(t, &out)
		return out
	}
	items := func(chat string) int {
		t.Helper()
		var c struct{ Items []any }
		expect(t, alice, "GET", "/api/apps/"+appID+"/chats/"+chat, nil, 200).JSON(t, &c)
		return len(c.Items)
	}
	// look runs the manifest as a turn, then rewinds that turn: the
	// chat and its sandbox stay as they were.
	look := func(chat string) string {
		t.Helper()
		n := items(chat)
		answer := say(chat, lookCmd)
		rewind(chat, n)
		if got := items(chat); got != n {
			t.Fatalf("looking left %d items, want %d", got, n)
		}
		i := strings.Index(answer, "./")
		if i < 0 {
			i = strings.Index(answer, "cwd=")
		}
		return answer[max(i, 0):]
	}
	// An upload before the chat's first turn: the chat has files, and
	// no sandbox yet.
	uploadVia(t, alice, appID, chatID, "", "u0.txt", "zero")
	say(chatID, "mkdir -p src && echo one > src/a.txt && printf '#!/bin/sh\\n' > src/run.sh && chmod 755 src/run.sh && echo i1 > /workspace/intermediate/i1.txt && cd src && export V=1")
	uploadVia(t, alice, appID, chatID, "", "u1.txt", "one")
	m1 := look(chatID)
	say(chatID, "echo two > a.txt && chmod 600 a.txt && head -c 200000 /dev/urandom > big.bin && mkdir -p /workspace/out && cd /workspace/out && "+
		"rm /workspace/uploads/u0.txt && echo changed >> /workspace/intermediate/i1.txt && head -c 100000 /dev/urandom > /workspace/intermediate/i2.bin && export V=2")
	m2 := look(chatID)
	say(chatID, "rm -rf /workspace/src && echo three > /workspace/out/r.txt && rm /workspace/intermediate/i2.bin && cd / && export V=3")
	m3 := look(chatID)
	if !strings.Contains(m1, "cwd=/workspace/src V=1") || !strings.Contains(m1, "./uploads/u0.txt f 644 4") || !strings.Contains(m1, "./uploads/u1.txt f 644 3") ||
		!strings.Contains(m1, "./intermediate/i1.txt f 644 3") || !strings.Contains(m2, "./src/big.bin f 644 200000") ||
		strings.Contains(m2, "u0.txt") || !strings.Contains(m2, "./intermediate/i2.bin f 644 100000") || !strings.Contains(m3, "cwd=/ V=3") ||
		strings.Contains(m3, "./src") || strings.Contains(m3, "i2.bin") {
		t.Fatalf("the turns' sandboxes:\n%s\n%s\n%s", m1, m2, m3)
	}

	// Regenerate turn 3: from its answer (item 5).
	if out := rewind(chatID, 5); out["sandbox"] != "restored" || out["redo"] != true || out["items"] != float64(4) {
		t.Errorf("the rewind answered %v", out)
	}
	if got := items(chatID); got != 4 {
		t.Errorf("%d items after regenerating turn 3, want 4", got)
	}
	// Redo, then look (a look is a turn: it would replace the redo).
	var redone map[string]any
	expect(t, alice, "POST", "/api/core/chat/item/redo", map[string]any{"appId": appID, "chatId": chatID}, 200).JSON(t, &redone)
	if redone["items"] != float64(6) || redone["sandbox"] != "restored" {
		t.Errorf("the redo answered %v", redone)
	}
	expect(t, alice, "POST", "/api/core/chat/item/redo", map[string]any{"appId": appID, "chatId": chatID}, 409)
	if got := look(chatID); got != m3 {
		t.Errorf("after the redo:\n%s\nwant turn 3's:\n%s", got, m3)
	}
	rewind(chatID, 5)
	if got := look(chatID); got != m2 {
		t.Errorf("after regenerating turn 3:\n%s\nwant turn 2's:\n%s", got, m2)
	}
	// Edit turn 2: from its question (item 2).
	rewind(chatID, 2)
	if got := look(chatID); got != m1 {
		t.Errorf("after editing turn 2:\n%s\nwant turn 1's:\n%s", got, m1)
	}
	if got := say(chatID, `echo "$(pwd) $V"; ls /workspace`); !strings.Contains(got, "/workspace/src 1") || strings.Contains(got, "out") {
		t.Errorf("the edited turn 2 ran in %q", got)
	}
	// The files panel lists what the sandbox has.
	if got := listUploads(t, alice, appID, chatID, "uploads"); !slices.Equal(got, []string{"u0.txt:4", "u1.txt:3"}) {
		t.Errorf("the uploads after editing turn 2: %v", got)
	}
	// Before turn 1, the sandbox did not exist, and the chat had one
	// upload: the rewind empties the sandbox and brings back that upload
	// alone.
	if out := rewind(chatID, 0); out["sandbox"] != "restored" {
		t.Errorf("rewinding turn 1 answered %v", out)
	}
	if got := say(chatID, "ls -A /workspace | grep -v -e skills -e uploads -e intermediate; echo \"$(pwd)\"; ls -A /workspace/uploads /workspace/intermediate"); strings.Contains(got, "src") ||
		!strings.Contains(got, "/workspace") || !strings.Contains(got, "u0.txt") || strings.Contains(got, "u1.txt") || strings.Contains(got, "i1.txt") {
		t.Errorf("after rewinding turn 1: %q", got)
	}
	if got := listUploads(t, alice, appID, chatID, "uploads"); !slices.Equal(got, []string{"u0.txt:4"}) {
		t.Errorf("the uploads after rewinding turn 1: %v", got)
	}

	// A fork at turn 1 of another chat, which goes on after it.
	other := "rewind-other"
	uploadVia(t, alice, appID, other, "", "o.txt", "mine")
	say(other, "echo first > f.txt && echo first > /workspace/intermediate/x.txt && export V=f")
	mf := look(other)
	say(other, "echo second > f.txt && echo second > /workspace/intermediate/x.txt && rm /workspace/uploads/o.txt && export V=s")
	var forked map[string]any
	expect(t, alice, "POST", "/api/core/chat/fork", map[string]any{"appId": appID, "chatId": other, "contentId": other + "/00000001", "newChatId": "rewind-fork"}, 200).JSON(t, &forked)
	if forked["chatId"] != "rewind-fork" || forked["items"] != float64(2) || forked["sandbox"] != "copied" {
		t.Errorf("the fork answered %v", forked)
	}
	// Its title says it is a branch of the original, in the chat list too.
	title := func(chat string) string {
		t.Helper()
		var c struct{ Chat struct{ Title string } }
		expect(t, alice, "GET", "/api/apps/"+appID+"/chats/"+chat, nil, 200).JSON(t, &c)
		return c.Chat.Title
	}
	var list struct {
		Chats []struct{ ChatID, Title string }
	}
	expect(t, alice, "GET", "/api/apps/"+appID+"/chats", nil, 200).JSON(t, &list)
	listed := map[string]string{}
	for _, c := range list.Chats {
		listed[c.ChatID] = c.Title
	}
	if want := title(other) + " (branch)"; forked["title"] != want || title("rewind-fork") != want || listed["rewind-fork"] != want {
		t.Errorf("the fork's title: answered %q, stored %q, listed %q; want %q", forked["title"], title("rewind-fork"), listed["rewind-fork"], want)
	}
	if got := look("rewind-fork"); got != mf {
		t.Errorf("the fork:\n%s\nwant the original's at turn 1:\n%s", got, mf)
	}
	if got := listUploads(t, alice, appID, "rewind-fork", "uploads"); !slices.Equal(got, []string{"o.txt:4"}) {
		t.Errorf("the fork's uploads: %v", got)
	}
	say("rewind-fork", "echo fork > g.txt && echo fork > /workspace/uploads/g.txt")
	if got := say(other, "cat f.txt /workspace/intermediate/x.txt; ls /workspace /workspace/uploads; echo $V"); !strings.Contains(got, "second\nsecond") || strings.Contains(got, "g.txt") || strings.Contains(got, "o.txt") || !strings.Contains(got, "s") {
		t.Errorf("the original after the fork: %q", got)
	}
	expect(t, alice, "POST", "/api/core/chat/fork", map[string]any{"appId": appID, "chatId": other, "contentId": other + "/00000001", "newChatId": "rewind-fork"}, 409)
	// A title of the caller's (the page's, in its reader's language).
	expect(t, alice, "POST", "/api/core/chat/fork", map[string]any{"appId": appID, "chatId": other, "contentId": other + "/00000001", "newChatId": "rewind-named", "title": "bad\ttitle"}, 400)
	expect(t, alice, "POST", "/api/core/chat/fork", map[string]any{"appId": appID, "chatId": other, "contentId": other + "/00000001", "newChatId": "rewind-named", "title": " 分支 "}, 200)
	if got := title("rewind-named"); got != "分支" {
		t.Errorf("the fork named by its caller is titled %q", got)
	}

	// A rewind while a run of the chat is in progress is refused: the
	// run's command has started (its output streams) when it is asked.
	resp, err := alice.Send("POST", "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": other, "stream": true, "detail": true,
		"messages": []map[string]string{{"role": "user", "content": "$ echo started; sleep 3"}}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the long run: %v %v", resp, err)
	}
	chatAPIReadSSE(t, resp.Body, func(ev sseEvent) bool { return ev.name != "toolOutput" })
	expect(t, alice, "POST", "/api/core/chat/item/delete", map[string]any{"appId": appID, "chatId": other, "contentId": other + "/00000000"}, 409)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Someone else's chat is not found; bad ids are refused.
	env.CreateUser(t, "bob", auth.RoleUser)
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	expect(t, bob, "POST", "/api/core/chat/item/delete", map[string]any{"appId": appID, "chatId": chatID, "contentId": chatID + "/00000000"}, 404)
	expect(t, alice, "POST", "/api/core/chat/item/delete", map[string]any{"appId": appID, "chatId": chatID, "contentId": "elsewhere/00000000"}, 400)
	expect(t, alice, "POST", "/api/core/chat/item/delete", map[string]any{"appId": appID, "chatId": chatID, "contentId": chatID + "/00000099"}, 404)

	// Deleting the chats deletes their sandboxes' files and checkpoints,
	// on the disk: the pool is empty again.
	expect(t, alice, "DELETE", "/api/apps/"+appID+"/chats", map[string]any{"chatIds": []string{chatID, other, "rewind-fork", "rewind-named"}}, 202)
	if err := env.Engine.StartWorkers(); err != nil {
		t.Fatal(err)
	}
	left := func() []string {
		var out []string
		for _, d := range []string{"live", "checkpoints", "chats/live", "chats/checkpoints"} {
			entries, _ := os.ReadDir(filepath.Join(pool, d))
			for _, e := range entries {
				out = append(out, d+"/"+e.Name())
			}
		}
		return out
	}
	for deadline := time.Now().Add(time.Minute); len(left()) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(filepath.Join(env.Config.Sandbox.Root, provider))
			var dirs []string
			for _, e := range entries {
				dirs = append(dirs, e.Name())
			}
			t.Fatalf("a minute after the chats' deletion, the pool still holds %v (the sandboxes' directories: %v)", left(), dirs)
		}
	}
}

// pad is an item's seq as a dataId writes it.
func pad(seq int) string { return fmt.Sprintf("%08d", seq) }

// TestRewindRetention: a chat keeps the checkpoints of its last
// FLOWBOX_CHECKPOINT_KEEP turns, or of fewer where its app's builder set
// checkpointKeep lower (more than the engine's is refused, with PATCH or
// PUT); a rewind further back is refused with the reason, one within
// them works.
func TestRewindRetention(t *testing.T) {
	t.Parallel()
	pool := checkpointtest.Pool(t)
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CHECKPOINTS": "on", "FLOWBOX_CHECKPOINT_POOL": pool, "FLOWBOX_CHECKPOINT_KEEP": "3"}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	appID, plain := newApp(t, alice, "retention"), newApp(t, alice, "plain")

	for _, bad := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"checkpointKeep": 4}, "checkpointKeep must be 1 to 3"},
		{map[string]any{"checkpointKeep": -1}, "checkpointKeep must be 1 to 3"},
		{map[string]any{"checkpointMaxAgeHours": 169}, "checkpointMaxAgeHours must be 1 to 168"},
	} {
		if resp := expect(t, alice, "PATCH", "/api/apps/"+appID, bad.body, 400); !strings.Contains(string(resp.Body), bad.want) {
			t.Errorf("PATCH %v: %s, want it to say %q", bad.body, resp.Body, bad.want)
		}
	}
	type appSettings struct {
		Name                  string         `json:"name"`
		Graph                 map[string]any `json:"graph"`
		CheckpointKeep        int            `json:"checkpointKeep"`
		CheckpointMaxAgeHours int            `json:"checkpointMaxAgeHours"`
		CheckpointLimits      struct {
			Keep, MaxAgeHours int
		} `json:"checkpointLimits"`
	}
	var app appSettings
	expect(t, alice, "PATCH", "/api/apps/"+appID, map[string]any{"checkpointKeep": 2, "checkpointMaxAgeHours": 24}, 200).JSON(t, &app)
	if app.CheckpointKeep != 2 || app.CheckpointMaxAgeHours != 24 || app.CheckpointLimits.Keep != 3 || app.CheckpointLimits.MaxAgeHours != 168 {
		t.Fatalf("the app after the PATCH: %+v, want keep 2 and 24 hours within the engine's 3 and 168", app)
	}
	// PUT refuses more than the engine's too, and keeps what it leaves out.
	put := map[string]any{"name": app.Name, "public": false, "graph": app.Graph, "checkpointKeep": 4}
	expect(t, alice, "PUT", "/api/apps/"+appID, put, 400)
	delete(put, "checkpointKeep")
	if expect(t, alice, "PUT", "/api/apps/"+appID, put, 200).JSON(t, &app); app.CheckpointKeep != 2 {
		t.Errorf("after a PUT without it: checkpointKeep %d, want 2", app.CheckpointKeep)
	}

	for _, chat := range []struct{ appID, chatID string }{{appID, "kept"}, {plain, "plain"}} {
		for i := 1; i <= 5; i++ {
			sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": chat.appID, "chatId": chat.chatID,
				"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("$ echo %d > n.txt", i)}}}, 200)
		}
	}
	// Each sandbox's checkpoints on disk.
	var kept []string
	entries, _ := os.ReadDir(filepath.Join(pool, "checkpoints"))
	for _, e := range entries {
		var names []string
		cps, _ := os.ReadDir(filepath.Join(pool, "checkpoints", e.Name()))
		for _, c := range cps {
			names = append(names, c.Name())
		}
		kept = append(kept, strings.Join(names, " "))
	}
	slices.Sort(kept)
	if want := []string{"t4 t6 t8", "t6 t8"}; !slices.Equal(kept, want) {
		t.Errorf("the chats' checkpoints on disk: %q, want %q: those before the app's chat's last two turns, and before the other app's chat's last three (the engine's)", kept, want)
	}
	for _, tc := range []struct {
		appID, chatID string
		refused, ok   int    // items before and after the chat's rewind floor
		says          string // the refusal
	}{
		{appID, "kept", 4, 6, "last 2 turns"},
		{plain, "plain", 2, 4, "last 3 turns"},
	} {
		resp := expect(t, alice, "POST", "/api/core/chat/item/delete", map[string]any{"appId": tc.appID, "chatId": tc.chatID, "contentId": tc.chatID + "/" + pad(tc.refused)}, 409)
		if !strings.Contains(string(resp.Body), tc.says) {
			t.Errorf("the refusal of %s's rewind says %s, want %q", tc.chatID, resp.Body, tc.says)
		}
		expect(t, alice, "POST", "/api/core/chat/item/delete", map[string]any{"appId": tc.appID, "chatId": tc.chatID, "contentId": tc.chatID + "/" + pad(tc.ok)}, 200)
	}
	_, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "kept",
		"messages": []map[string]string{{"role": "user", "content": "$ cat n.txt"}}}, 200)
	if !strings.Contains(answer, "\n3\n") || strings.Contains(answer, "\n4\n") {
		t.Errorf("after going back to turn 4: %q, want turn 3's 3", answer)
	}
}

// TestSessionSnapshots (R3): through the sandbox service API, a
// session's sandbox is kept under a name and a new session starts from
// it with its files and shell state, while the first goes on; snapshots
// are listed and deleted; another user cannot start from one.
func TestSessionSnapshots(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CHECKPOINTS": "on", "FLOWBOX_CHECKPOINT_POOL": checkpointtest.Pool(t)}})
	carol := env.CreateUser(t, "snap-carol", auth.RoleUser)
	bob := env.CreateUser(t, "snap-bob", auth.RoleUser)
	c, b := env.Bearer(env.APIKey(t, carol)), env.Bearer(env.APIKey(t, bob))
	newSession := func(client *enginetest.Client, body map[string]any, want int) string {
		t.Helper()
		var s struct{ ID string }
		expect(t, client, "POST", "/api/sandbox/v1/sessions", body, want).JSON(t, &s)
		return s.ID
	}
	first := newSession(c, map[string]any{"name": "first"}, 201)
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions/"+first+"/snapshots", map[string]any{"name": "early"}), 409, "not_started")
	execute(t, c, first, "shell:exec", map[string]any{"command": "echo one > f.txt && mkdir -p /workspace/d && cd /workspace/d && export X=1"})
	var snap struct {
		Session, Name string
		Created       time.Time
	}
	expect(t, c, "POST", "/api/sandbox/v1/sessions/"+first+"/snapshots", map[string]any{"name": "a"}, 201).JSON(t, &snap)
	if snap.Session != first || snap.Name != "a" || snap.Created.IsZero() {
		t.Errorf("the snapshot: %+v", snap)
	}
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions/"+first+"/snapshots", map[string]any{"name": "a"}), 409, "exists")
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions/"+first+"/snapshots", map[string]any{"name": "../x"}), 400, "bad_request")
	execute(t, c, first, "shell:exec", map[string]any{"command": "echo two > /workspace/f.txt && cd / && export X=2"})

	second := newSession(c, map[string]any{"name": "second", "fromSnapshot": map[string]any{"session": first, "snapshot": "a"}}, 201)
	if got := execute(t, c, second, "shell:exec", map[string]any{"command": `cat /workspace/f.txt; echo "$(pwd) $X"`}).Text; !strings.Contains(got, "one\n/workspace/d 1") {
		t.Errorf("the session from the snapshot: %q, want one and /workspace/d 1", got)
	}
	execute(t, c, second, "shell:exec", map[string]any{"command": "echo three > /workspace/f.txt"})
	if got := execute(t, c, first, "shell:exec", map[string]any{"command": `cat /workspace/f.txt; echo "$(pwd) $X"`}).Text; !strings.Contains(got, "two\n/ 2") {
		t.Errorf("the first session after the second's write: %q", got)
	}
	// bob cannot start from carol's snapshot, nor see it.
	wantError(t, b.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"fromSnapshot": map[string]any{"session": first, "snapshot": "a"}}), 404, "not_found")
	wantError(t, b.Do(t, "GET", "/api/sandbox/v1/sessions/"+first+"/snapshots", nil), 404, "not_found")

	var list struct{ Snapshots []struct{ Name string } }
	expect(t, c, "GET", "/api/sandbox/v1/sessions/"+first+"/snapshots", nil, 200).JSON(t, &list)
	if len(list.Snapshots) != 1 || list.Snapshots[0].Name != "a" {
		t.Errorf("the snapshots: %+v", list)
	}
	expect(t, c, "DELETE", "/api/sandbox/v1/sessions/"+first+"/snapshots/a", nil, 200)
	wantError(t, c.Do(t, "DELETE", "/api/sandbox/v1/sessions/"+first+"/snapshots/a", nil), 404, "not_found")
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"fromSnapshot": map[string]any{"session": first, "snapshot": "a"}}), 404, "not_found")
	expect(t, c, "GET", "/api/sandbox/v1/sessions/"+first+"/snapshots", nil, 200).JSON(t, &list)
	if len(list.Snapshots) != 0 {
		t.Errorf("after the delete: %+v", list)
	}
}
