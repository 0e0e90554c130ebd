package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
)

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestServeOnEmbeddedDefaults runs engine serve as a newcomer does, with
// nothing configured but a data directory and a password: the embedded
// database and Redis, bwrap, the workers in the process. It answers, a
// command runs through the chat API, and a signal stops it cleanly.
func TestServeOnEmbeddedDefaults(t *testing.T) {
	probe, err := bwrap.New(bwrap.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", probe.Fingerprint(context.Background()))
	addr := freeAddr(t)
	data := t.TempDir()
	// The chats' disks stay mounted after the engine ends, as across
	// restarts: detached before the directory is removed.
	t.Cleanup(func() { testenv.UnmountUnder(data) })
	t.Setenv("FLOWBOX_DATA_DIR", data)
	t.Setenv("FLOWBOX_ADMIN_PASSWORD", "first-admin-password")
	t.Setenv("FLOWBOX_LOG_LEVEL", "warn")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, []string{"-addr", addr}) }()

	base := "http://" + addr
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 2 minutes (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Sign in as the first admin and run a command through the demo app.
	login, _ := json.Marshal(map[string]string{"name": "admin", "password": "first-admin-password"})
	resp, err := http.Post(base+"/api/login", "application/json", bytes.NewReader(login))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	var session struct {
		CSRF string `json:"csrfToken"`
	}
	cookies := resp.Cookies()
	req, _ := http.NewRequest("GET", base+"/api/me", nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	me, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(me.Body).Decode(&session)
	me.Body.Close()
	turn, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "$ echo served by $((40+2))"}}})
	req, _ = http.NewRequest("POST", base+"/api/v1/chat/completions", bytes.NewReader(turn))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", session.CSRF)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	chat, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	err = json.NewDecoder(chat.Body).Decode(&answer)
	chat.Body.Close()
	if err != nil || chat.StatusCode != http.StatusOK || len(answer.Choices) == 0 || !strings.Contains(answer.Choices[0].Message.Content, "served by 42") {
		t.Fatalf("chat: %d %+v (%v); want the command's output in the answer", chat.StatusCode, answer, err)
	}
	// Where the machine can keep checkpoints (root, btrfs-progs), the
	// defaults keep them: the chat's sandbox has its files in the pool,
	// and the chat's uploads and intermediate files theirs.
	if checkpoint.Usable() == nil {
		for _, dir := range []string{"live", "chats/live"} {
			live, err := os.ReadDir(filepath.Join(data, "sandboxes", "checkpoints", dir))
			if err != nil || len(live) == 0 {
				t.Errorf("the checkpoint pool's %s on the defaults holds %v (%v); want the chat's files", dir, live, err)
			}
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after its context ended: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of its signal")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after it stopped")
	}
}

// TestCommandsRefuseBadConfiguration: a bad value stops each command with
// an error naming it, before anything starts.
func TestCommandsRefuseBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		run  func(ctx context.Context) error
		want string
	}{
		{"serve, log level", map[string]string{"FLOWBOX_LOG_LEVEL": "garbage"},
			func(ctx context.Context) error { return serve(ctx, nil) }, "FLOWBOX_LOG_LEVEL"},
		{"worker on the embedded defaults", nil,
			func(ctx context.Context) error { return worker(ctx, nil) }, "FLOWBOX_MONGODB_URI"},
		{"worker, arguments", nil,
			func(ctx context.Context) error { return worker(ctx, []string{"now"}) }, "takes no arguments"},
		{"migrate, provider", map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "vm"},
			func(ctx context.Context) error { return migrate(ctx) }, "use auto, bwrap, docker, kubernetes or host"},
		{"shell, two commands", nil,
			func(ctx context.Context) error { _, err := shell(ctx, []string{"ls", "pwd"}, nil, nil); return err }, "exactly one command"},
		{"sandbox-agent, no socket", nil,
			func(ctx context.Context) error { return sandboxAgent(ctx, nil) }, "-socket"},
		{"sandbox-agent, log level", nil,
			func(ctx context.Context) error {
				return sandboxAgent(ctx, []string{"-socket", "/nonexistent/s", "-log-level", "loud"})
			}, "use debug, info, warn or error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FLOWBOX_DATA_DIR", t.TempDir())
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := tc.run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestUserCommand: an operator manages accounts at a shell, on the
// embedded database the engine would open.
func TestUserCommand(t *testing.T) {
	t.Setenv("FLOWBOX_DATA_DIR", t.TempDir())
	t.Setenv("FLOWBOX_LOG_LEVEL", "warn")
	ctx := context.Background()
	run := func(stdin string, args ...string) (string, error) {
		var out strings.Builder
		err := user(ctx, args, strings.NewReader(stdin), &out)
		return out.String(), err
	}
	if out, err := run("first admin pw\n", "add", "-role", "admin", "Root"); err != nil || !strings.Contains(out, "created root (admin)") || strings.Contains(out, "password:") {
		t.Fatalf("add with a password: %q %v", out, err)
	}
	out, err := run("", "add", "dana")
	_, after, shown := strings.Cut(out, "password: ")
	made, _, _ := strings.Cut(after, "\n")
	if err != nil || !strings.Contains(out, "created dana (user)") || !shown || len(made) < 16 {
		t.Fatalf("add without a password: %q %v; want a made-up password shown", out, err)
	}
	if _, err := run("another pw!", "add", "dana"); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("adding a taken name: %v", err)
	}
	if out, err := run("", "disable", "dana"); err != nil || out != "disabled dana\n" {
		t.Errorf("disable: %q %v", out, err)
	}
	out, err = run("", "list")
	if err != nil || !regexpMatch(`(?m)^dana\s+user\s+disabled\s`, out) || !regexpMatch(`(?m)^root\s+admin\s+active\s`, out) {
		t.Errorf("list: %q %v", out, err)
	}
	if _, err := run("", "enable", "nobody"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("enable of an unknown user: %v", err)
	}
	if out, err := run("dana's new pw\n", "reset-password", "dana"); err != nil || !strings.Contains(out, "sessions ended") {
		t.Errorf("reset-password: %q %v", out, err)
	}
	for _, args := range [][]string{{}, {"remove", "dana"}, {"add"}, {"list", "extra"}} {
		if _, err := run("", args...); err == nil || !strings.Contains(err.Error(), "usage: engine user") {
			t.Errorf("engine user %q: %v; want the usage", args, err)
		}
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
