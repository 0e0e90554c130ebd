package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/nodes/history"
)

func TestPagesRender(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	ts, _ := nodes.LoadTemplates()
	appStore, chats := apps.New(db, ts), history.New(db)
	appStore.EnsureDemo(ctx, "u:alice", time.Now())
	ch, _ := chats.Owned(ctx, "c1", "demo", "u:alice")
	calls := `[{"id":"x","toolName":"sandbox_shell","params":"{\"command\":\"echo \\u003cscript\\u003e\"}","response":"{\"stdout\":\"\\u003cscript\\u003ealert(1)\\u003c/script\\u003e\\n\",\"exitCode\":0}","durationMs":5,"status":"success"}]`
	chats.AppendTurn(ctx, ch, history.Item{Role: "user", Text: "<b>hi</b>"}, history.Item{Role: "assistant", Text: "<script>alert(2)</script>", ToolCalls: []byte(calls)}, time.Now())
	ui := &UI{Apps: appStore, Chats: chats, Access: &Access{Apps: appStore, Chats: chats}, Templates: ts}
	if err := ui.Load(); err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		if p, ok := people[c.GetHeader("X-As")]; ok {
			c.Set(principalKey, p)
		}
	})
	r.GET("/login", ui.Login)
	pages := r.Group("/", RequirePage())
	pages.GET("/", ui.AppList)
	pages.GET("/apps/:appId/edit", ui.Builder)
	pages.GET("/apps/:appId/chat/:chatId", ui.Chat)
	srv := httptest.NewServer(r)
	defer srv.Close()
	get := func(path, who, lang string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("X-As", who)
		req.Header.Set("Accept-Language", lang)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/", "", "en"); code != http.StatusSeeOther {
		t.Errorf("anonymous visit: %d, want a redirect to sign in", code)
	}
	if code, body := get("/login", "", "en"); code != 200 || !strings.Contains(body, `id="login"`) {
		t.Errorf("login page: %d", code)
	}
	if code, body := get("/", "alice", "en"); code != 200 || !strings.Contains(body, `data-app="demo"`) {
		t.Errorf("app list: %d %s", code, body)
	}
	for lang, want := range map[string][]string{
		"en": {"Enable sandbox (Computer Use)", "When on, the agent gets its own Linux environment where it can run commands and work with files"},
		"zh": {"启用沙盒(Computer Use)", "开启后,Agent 将获得一个独立 Linux 环境,可执行命令、操作文件"},
	} {
		code, body := get("/apps/demo/edit", "alice", lang)
		for _, w := range want {
			if code != 200 || !strings.Contains(body, w) {
				t.Errorf("builder in %s: %d, lacks %q", lang, code, w)
			}
		}
		if !strings.Contains(body, `id="useAgentSandbox" name="useAgentSandbox" checked`) {
			t.Errorf("builder in %s: the switch is not shown on", lang)
		}
	}
	code, body := get("/apps/demo/chat/c1", "alice", "en")
	if code != 200 {
		t.Fatalf("chat page: %d", code)
	}
	for _, raw := range []string{"<script>alert", "<b>hi</b>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the chat page contains %q unescaped", raw)
		}
	}
	if !strings.Contains(body, "&lt;b&gt;hi&lt;/b&gt;") || !strings.Contains(body, `class="tool-card"`) {
		t.Errorf("the chat page lacks the escaped question or the command card")
	}
	if code, _ := get("/apps/demo/chat/c1", "bob", "en"); code != 404 {
		t.Errorf("another user's chat page: %d, want 404", code)
	}
}
