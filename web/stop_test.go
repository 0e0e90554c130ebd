package web_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// running is a streamed chat run that the test reads in the background.
type running struct {
	chatID string
	done   chan string // everything the stream sent, once it ended
	close  func()      // goes away, as a closed page does
}

// startRun streams a turn whose command sleeps for secs seconds (a number
// no other test sleeps for) and returns once the sleep runs.
func startRun(t *testing.T, c *enginetest.Client, path string, body map[string]any, secs int) *running {
	t.Helper()
	// The chat's id comes with the first answer text, after the command:
	// the client names it.
	body["chatId"] = "stop-" + strconv.Itoa(secs) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	body["stream"], body["detail"] = true, true
	body["messages"] = message("$ sleep " + strconv.Itoa(secs))
	resp, err := c.Send("POST", path, body)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("start run: status %d", resp.StatusCode)
	}
	r := &running{chatID: body["chatId"].(string), done: make(chan string, 1), close: func() { resp.Body.Close() }}
	go func() {
		var all strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
		}
		r.done <- all.String()
	}()
	untilTrue(t, "the sandbox's sleep "+strconv.Itoa(secs)+" to start", func() bool { return sleeping(secs) })
	return r
}

// sleeping says whether a process "sleep secs" runs on this machine (the
// sandbox's processes are the machine's).
func sleeping(secs int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	want := "sleep\x00" + strconv.Itoa(secs) + "\x00"
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && string(b) == want {
			return true
		}
	}
	return false
}

func untilTrue(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// ended waits a few seconds for the stream to end and returns it.
func (r *running) ended(t *testing.T) string {
	t.Helper()
	select {
	case all := <-r.done:
		return all
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end within 5 s of the stop")
	}
	return ""
}

func stop(t *testing.T, c *enginetest.Client, path string, body map[string]any, want int) (stopped bool) {
	t.Helper()
	resp := expect(t, c, "POST", path, body, want)
	if want != 200 {
		// A refusal takes OpenAI's shape, as completions' do (E5).
		var refused struct {
			Error struct{ Message, Type string }
		}
		resp.JSON(t, &refused)
		if refused.Error.Message == "" || refused.Error.Type == "" {
			t.Errorf("stop refused with %s, want OpenAI's {\"error\": {\"message\", \"type\", ...}}", resp.Body)
		}
		return false
	}
	var out struct{ Stopped *bool }
	resp.JSON(t, &out)
	if out.Stopped == nil {
		t.Fatalf("stop answered %s, want {\"stopped\": ...}", resp.Body)
	}
	return *out.Stopped
}

// checkStopped checks what the stopped run's client read and that its
// command is gone.
func checkStopped(t *testing.T, r *running, secs int) {
	t.Helper()
	all := r.ended(t)
	for _, want := range []string{"Stopped by the user.", "event: stopped", "[DONE]"} {
		if !strings.Contains(all, want) {
			t.Errorf("the stopped stream lacks %q:\n%s", want, all)
		}
	}
	untilTrue(t, "the sandbox's sleep to end", func() bool { return !sleeping(secs) })
}

// TestStopRun stops a run from a second request (E3): the stream ends at
// once with the stop's line, the sandbox's command ends, and the history
// keeps the stop and the cancelled command.
func TestStopRun(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	app, other := newApp(t, alice, "stoppable"), newApp(t, alice, "other")
	var key struct{ Key string }
	expect(t, alice, "POST", "/api/apps/"+other+"/keys", map[string]any{"name": "other"}, 201).JSON(t, &key)
	otherKey := env.Bearer(key.Key)

	r := startRun(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app}, 3171)
	target := map[string]any{"appId": app, "chatId": r.chatID}
	// Nobody else reaches the run: not another user, not a key of
	// another app; it goes on.
	stop(t, bob, "/api/v1/chat/stop", target, 404)
	stop(t, otherKey, "/api/v1/chat/stop", target, 404)
	if !sleeping(3171) {
		t.Fatal("a refused stop ended the run")
	}
	if !stop(t, alice, "/api/v1/chat/stop", target, 200) {
		t.Error("stopping a run in progress: stopped false, want true")
	}
	checkStopped(t, r, 3171)

	var chat struct {
		Items []struct{ Role, Text string }
	}
	expect(t, alice, "GET", "/api/apps/"+app+"/chats/"+r.chatID, nil, 200).JSON(t, &chat)
	if n := len(chat.Items); n == 0 || !strings.HasSuffix(chat.Items[n-1].Text, "Stopped by the user.") || strings.Contains(chat.Items[n-1].Text, "context canceled") {
		t.Errorf("history after the stop: %+v, want the answer to end with the stop's line", chat.Items)
	}
	if statuses, _ := toolStatuses(t, alice, app, r.chatID); strings.Join(statuses, ",") != "cancelled" {
		t.Errorf("the stopped command's card: %v, want cancelled", statuses)
	}
	// Nothing runs now.
	if stop(t, alice, "/api/v1/chat/stop", target, 200) {
		t.Error("stopping an idle chat: stopped true, want false")
	}
	stop(t, bob, "/api/v1/chat/stop", target, 404)
}

// TestStopRunVisitor: a share link's visitor stops their own run, and
// another visitor of the link cannot.
func TestStopRunVisitor(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "shared")
	l := newLink(t, alice, app, map[string]any{"name": "stop", "showTools": true})
	visitor, other := visit(t, env, "/share/"+l.ID), visit(t, env, "/share/"+l.ID)
	api := "/share/" + l.ID + "/api/v1/chat/"

	r := startRun(t, visitor, api+"completions", map[string]any{}, 3172)
	stop(t, other, api+"stop", map[string]any{"chatId": r.chatID}, 404)
	if !stop(t, visitor, api+"stop", map[string]any{"chatId": r.chatID}, 200) {
		t.Error("the visitor stopping their run: stopped false, want true")
	}
	checkStopped(t, r, 3172)
}

// TestStopRunElsewhere stops a run in the engine process that runs it
// from another process on the same database and Redis.
func TestStopRunElsewhere(t *testing.T) {
	t.Parallel()
	first := enginetest.Start(t, enginetest.Options{})
	first.CreateUser(t, "alice", auth.RoleUser)
	alice := first.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "elsewhere")
	redisOpts := first.Engine.Services.Redis.Options()
	second := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_MONGODB_URI": first.Config.MongoURI, "FLOWBOX_MONGODB_DB": first.Config.MongoDB,
		"FLOWBOX_REDIS_ADDR": redisOpts.Addr, "FLOWBOX_REDIS_PASSWORD": redisOpts.Password}})
	there := second.Login(t, "alice", enginetest.Password("alice"))

	r := startRun(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app}, 3173)
	if !stop(t, there, "/api/v1/chat/stop", map[string]any{"appId": app, "chatId": r.chatID}, 200) {
		t.Error("stopping from another engine process: stopped false, want true")
	}
	checkStopped(t, r, 3173)
}

// TestClosedRunHistory: a run whose client went away is kept with a
// readable line, not the raw context error, and its command as cancelled.
func TestClosedRunHistory(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "closed")
	r := startRun(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app}, 3174)
	r.close()
	untilTrue(t, "the sandbox's sleep to end", func() bool { return !sleeping(3174) })
	var last string
	untilTrue(t, "the turn to be recorded", func() bool {
		var chat struct{ Items []struct{ Text string } }
		resp := alice.Do(t, "GET", "/api/apps/"+app+"/chats/"+r.chatID, nil)
		if resp.Status != 200 {
			return false
		}
		resp.JSON(t, &chat)
		if n := len(chat.Items); n > 0 {
			last = chat.Items[n-1].Text
		}
		return last != ""
	})
	if !strings.HasSuffix(last, "Interrupted: the connection closed before the answer was complete.") || strings.Contains(last, "context canceled") {
		t.Errorf("history after the client went away: %q", last)
	}
	if statuses, _ := toolStatuses(t, alice, app, r.chatID); strings.Join(statuses, ",") != "cancelled" {
		t.Errorf("the interrupted command's card: %v, want cancelled", statuses)
	}
}
