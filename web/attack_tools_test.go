package web_test

// The attack on tool scoping (T9, issue 28 finding 13): an app key
// whose app lists no tools ran the operator's host exec tools and the
// admins' MCP servers through the sandbox service API. Exec tools and
// MCP servers are callable only by sessions of an app that lists them,
// and by callers without an app only as FLOWBOX_SERVICE_TOOLS allows.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

func TestAttackServiceAPIUnlistedTools(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, []byte(execTools), 0o644); err != nil {
		t.Fatal(err)
	}
	echo := newEchoServer(t, "s3cret-token")
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_EXEC_TOOLS": file,
		"FLOWBOX_OUTBOUND_ALLOW": echo.Listener.Addr().String()}})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "team", "name": "Team", "transport": "http",
		"url": echo.URL, "token": "s3cret-token", "enabled": true}, 201)
	env.CreateUser(t, "mallory", auth.RoleUser)
	mallory := env.Login(t, "mallory", enginetest.Password("mallory"))

	// appKey makes an app whose tool-call node lists tools, and a key of
	// it, and returns the key's client with a session.
	appKey := func(name string, tools []string) (*enginetest.Client, string, string) {
		t.Helper()
		graph := apps.DemoGraph()
		list, _ := json.Marshal(tools)
		graph.Nodes[1].Inputs["tools"] = list
		var app struct {
			ID string `json:"appId"`
		}
		expect(t, mallory, "POST", "/api/apps", map[string]any{"name": name, "public": false, "graph": graph}, 201).JSON(t, &app)
		var key struct {
			Key string `json:"key"`
		}
		expect(t, mallory, "POST", "/api/apps/"+app.ID+"/keys", map[string]any{"name": "program"}, 201).JSON(t, &key)
		c := env.Bearer(key.Key)
		var s sessionView
		expect(t, c, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &s)
		return c, s.ID, app.ID
	}
	listed := func(c *enginetest.Client) string {
		t.Helper()
		var tools struct{ Tools []struct{ Name string } }
		expect(t, c, "GET", "/api/sandbox/v1/tools", nil, 200).JSON(t, &tools)
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		return strings.Join(names, ",")
	}
	const sandboxTools = "shell:exec,shell:process,file:read,file:write,file:list,skill:list,skill:load,skill:read,skill:run"

	// The attack: an app that lists no tools.
	bare, bareSession, bareApp := appKey("no tools", []string{})
	for _, call := range []struct {
		tool   string
		params map[string]any
	}{{"exec:shout", map[string]any{"text": "pwned"}}, {"shout", map[string]any{"text": "pwned"}},
		{"exec:where_am_i", map[string]any{}}, {"mcp:team/echo", map[string]any{"text": "pwned"}}} {
		e := wantError(t, bare.Do(t, "POST", "/api/sandbox/v1/sessions/"+bareSession+"/execute", map[string]any{"tool": call.tool, "params": call.params}), 403, "forbidden")
		if !strings.Contains(e.Message, "not offered to this app") || !strings.Contains(e.Message, "tool-call node") {
			t.Errorf("%s: %q, want a refusal saying the app does not list it", call.tool, e.Message)
		}
		wantError(t, bare.Do(t, "POST", "/api/sandbox/v1/execute", map[string]any{"tool": call.tool, "params": call.params}), 403, "forbidden")
	}
	if got := listed(bare); got != sandboxTools {
		t.Errorf("the bare app's key lists %s, want %s", got, sandboxTools)
	}
	// The sandbox's own tools still work for it.
	if res := execute(t, bare, bareSession, "shell:exec", map[string]any{"command": "echo ok"}); res.Text != "ok\n" {
		t.Errorf("shell:exec in the bare app's session: %+v", res)
	}

	// Sessions follow the graph the app's chats run: once the app has a
	// published version, a tool listed in its draft only is not offered
	// to them until the draft is published.
	expect(t, mallory, "POST", "/api/apps/"+bareApp+"/versions", map[string]any{"note": "no tools"}, 201)
	draft := apps.DemoGraph()
	draft.Nodes[1].Inputs["tools"] = []byte(`["shout"]`)
	expect(t, mallory, "PUT", "/api/apps/"+bareApp, map[string]any{"name": "no tools", "public": false, "graph": draft}, 200)
	wantError(t, bare.Do(t, "POST", "/api/sandbox/v1/sessions/"+bareSession+"/execute", map[string]any{"tool": "exec:shout", "params": map[string]any{"text": "draft"}}), 403, "forbidden")
	if got := listed(bare); got != sandboxTools {
		t.Errorf("with the tool in its draft only, the app's key lists %s, want %s", got, sandboxTools)
	}
	expect(t, mallory, "POST", "/api/apps/"+bareApp+"/versions", map[string]any{"note": "shout"}, 201)
	if res := execute(t, bare, bareSession, "exec:shout", map[string]any{"text": "published"}); res.Text != "PUBLISHED\n" || res.IsError {
		t.Errorf("exec:shout once published: %+v", res)
	}

	// A personal key has what the operator allows: the sandbox tools.
	personal := env.Bearer(env.APIKey(t, env.CreateUser(t, "pat", auth.RoleUser)))
	e := wantError(t, personal.Do(t, "POST", "/api/sandbox/v1/execute", map[string]any{"tool": "exec:shout", "params": map[string]any{"text": "x"}}), 403, "forbidden")
	if !strings.Contains(e.Message, "FLOWBOX_SERVICE_TOOLS") {
		t.Errorf("a personal key's exec tool: %q, want the setting named", e.Message)
	}
	if got := listed(personal); got != sandboxTools {
		t.Errorf("a personal key lists %s, want %s", got, sandboxTools)
	}
	var own sessionView
	expect(t, personal, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &own)
	if res := execute(t, personal, own.ID, "shell:exec", map[string]any{"command": "echo ok"}); res.Text != "ok\n" {
		t.Errorf("shell:exec with a personal key: %+v", res)
	}

	// The legitimate use: an app that lists the tools calls them.
	listing, session, _ := appKey("lists them", []string{"shout", "mcp:team"})
	if res := execute(t, listing, session, "exec:shout", map[string]any{"text": "api"}); res.Text != "API\n" || res.IsError {
		t.Errorf("exec:shout for the app that lists it: %+v", res)
	}
	if res := execute(t, listing, session, "mcp:team/echo", map[string]any{"text": "hi"}); !strings.Contains(res.Text, "echo: hi") {
		t.Errorf("mcp:team/echo for the app that lists it: %+v", res)
	}
	wantError(t, listing.Do(t, "POST", "/api/sandbox/v1/sessions/"+session+"/execute", map[string]any{"tool": "exec:where_am_i", "params": map[string]any{}}), 403, "forbidden")
	if got := listed(listing); got != sandboxTools+",exec:shout,mcp:team/echo" {
		t.Errorf("the listing app's key lists %s", got)
	}
}
