package web_test

// TestOpenAISDK drives the chat API with OpenAI's official JavaScript SDK
// (web/testdata/openai-sdk, installed by npm ci from its lock): what its
// users do with it must work as they expect (E5).

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
)

type sdkUsage struct {
	Prompt     int `json:"prompt_tokens"`
	Completion int `json:"completion_tokens"`
	Total      int `json:"total_tokens"`
}

type sdkFailure struct {
	Status     int    `json:"status"`
	Message    string `json:"message"`
	Type       string `json:"type"`
	Code       string `json:"code"`
	RetryAfter string `json:"retryAfter"`
}

type sdkResult struct {
	Models []struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	} `json:"models"`
	Plain struct {
		Model string   `json:"model"`
		Usage sdkUsage `json:"usage"`
		Text  string   `json:"text"`
	} `json:"plain"`
	Stream struct {
		Model        string    `json:"model"`
		Usage        *sdkUsage `json:"usage"`
		UsageChoices int       `json:"usageChoices"`
		Text         string    `json:"text"`
	} `json:"stream"`
	History struct {
		First       string   `json:"first"`
		Third       string   `json:"third"`
		SecondUsage sdkUsage `json:"secondUsage"`
		IDs         []string `json:"ids"`
	} `json:"history"`
	BadKey       sdkFailure `json:"badKey"`
	Invalid      sdkFailure `json:"invalid"`
	Capped       sdkFailure `json:"capped"`
	CappedStream sdkFailure `json:"cappedStream"`
}

func TestOpenAISDK(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("testdata/openai-sdk")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
		if err != nil {
			err = errors.New("web/testdata/openai-sdk is not installed: run npm ci there")
		}
	}
	testenv.Need(t, "openai-sdk", err)

	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CAP_USER_RUNS": "1"}, Workers: true})
	userID := env.CreateUser(t, "sdk", auth.RoleUser)
	key := env.APIKey(t, userID)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sdk.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FLOWBOX_URL="+env.URL, "FLOWBOX_KEY="+key, "FLOWBOX_APP="+apps.DemoAppID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK script failed: %v\n%s\n%s", err, out, stderr.String())
	}
	var got sdkResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK script printed %s: %v", out, err)
	}

	// The models are the apps the user may chat with: the public demo.
	if len(got.Models) != 1 || got.Models[0].ID != apps.DemoAppID {
		t.Errorf("models: %+v; want the demo app %s only", got.Models, apps.DemoAppID)
	}
	// The demo model counts words: the answer's words are its completion.
	words := func(s string) int { return len(strings.Fields(s)) }
	p := got.Plain
	if p.Model != apps.DemoAppID || p.Usage.Completion != words(p.Text) || p.Usage.Prompt <= words("hello there") ||
		p.Usage.Total != p.Usage.Prompt+p.Usage.Completion {
		t.Errorf("a completion: model %q, usage %+v for %q; want the app's id and the words counted", p.Model, p.Usage, p.Text)
	}
	s := got.Stream
	if s.Model != apps.DemoAppID || s.Text != p.Text || s.Usage == nil || *s.Usage != p.Usage || s.UsageChoices != 0 {
		t.Errorf("a stream: model %q, text %q, usage %+v in a chunk with %d choices; want the completion's, usage in a last chunk without choices",
			s.Model, s.Text, s.Usage, s.UsageChoices)
	}

	// The history sent without chatId reached the model: the second
	// call's prompt is the first call's question and answer longer.
	h := got.History
	if !strings.Contains(h.First, "remembered") || !strings.Contains(h.Third, "again") {
		t.Errorf("the commands' answers %q and %q do not show their output", h.First, h.Third)
	}
	if want := p.Usage.Prompt + words("$ echo remembered") + words(h.First); h.SecondUsage.Prompt != want {
		t.Errorf("the call with history had a prompt of %d words, want %d (the history's words more than without)", h.SecondUsage.Prompt, want)
	}
	if len(h.IDs) != 2 || h.IDs[0] == h.IDs[1] {
		t.Fatalf("the runs with history answered the ids %q; want two distinct", h.IDs)
	}
	for _, id := range h.IDs {
		scope := sandbox.Scope{AppID: apps.DemoAppID, UserID: userID, ChatID: id}
		if _, err := env.Engine.Chats.Get(context.Background(), scope); !errors.Is(err, history.ErrNotFound) {
			t.Errorf("a run without chatId stored chat %s (%v)", id, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		records, err := env.Engine.Services.Store.ByProvider(context.Background(), env.Engine.Services.Provider.Name())
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, r := range records {
			if r.ChatID == h.IDs[1] {
				left = append(left, string(r.Status))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox of the run without chatId is still there after 30s (%v)", left)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A bad key: the SDK shows the whole message.
	if b := got.BadKey; b.Status != 401 || !strings.Contains(b.Message, "API key") || b.Type != "authentication_error" {
		t.Errorf("a bad key: %+v; want 401 with the message in full", b)
	}
	// A request the API refuses: the SDK shows what to send instead.
	if b := got.Invalid; b.Status != 400 || !strings.Contains(b.Message, `messages must end with a non-empty {"role":"user"`) ||
		b.Type != "invalid_request_error" || b.Code != "bad_request" {
		t.Errorf("no message: %+v; want 400 with the message in full", b)
	}
	// Over the cap: 429 with Retry-After, streamed or not.
	for _, c := range []sdkFailure{got.Capped, got.CappedStream} {
		if c.Status != 429 || c.RetryAfter == "" || !strings.Contains(c.Message, "refused") || c.Type != "rate_limit_error" {
			t.Errorf("a run over the cap: %+v; want 429 with Retry-After and the refusal", c)
		}
	}
}
