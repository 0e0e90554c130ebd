package sandboxapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox/sessions"
)

// DefaultServiceTools are what service-API sessions without an app may
// call when API.ServiceTools is nil: the sandbox's own tools.
var DefaultServiceTools = []string{"shell:*", "file:*", "skill:*"}

// sandboxPrefixes are the tools of the session's own sandbox, which every
// app's session may call: exec tools run the operator's programs and MCP
// servers reach other systems, so those need the app to list them.
var sandboxPrefixes = []string{"shell:", "file:", "skill:"}

// toolScope says which registry tools (by full name) a session may call.
type toolScope struct {
	// listed are the app's chosen names ("weather", "exec:weather",
	// "mcp:docs", "mcp:docs/search"), or the operator's patterns
	// ("shell:*") for sessions without an app.
	listed []string
	app    bool
}

// allows reports whether the tool named name may be called.
func (s toolScope) allows(name string) bool {
	if s.app {
		for _, p := range sandboxPrefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
	}
	for _, l := range s.listed {
		switch {
		case strings.HasSuffix(l, ":*") && strings.HasPrefix(name, strings.TrimSuffix(l, "*")):
			return true
		case !strings.Contains(l, ":") && name == "exec:"+l: // an exec tool's bare name
			return true
		case name == l || strings.HasPrefix(name, l+"/"): // a tool, or an MCP server's every tool
			return true
		}
	}
	return false
}

// refusal says why a tool is not this session's to call.
func (s toolScope) refusal(name string) string {
	if s.app {
		return fmt.Sprintf("tool %s is not offered to this app's sessions: exec tools and MCP servers are callable only where the app's tool-call node lists them; add it there in the builder", name)
	}
	allowed := "no tools"
	if len(s.listed) > 0 {
		allowed = strings.Join(s.listed, ", ")
	}
	return fmt.Sprintf("tool %s is not offered to sessions without an app: the operator allows them %s (FLOWBOX_SERVICE_TOOLS); make the session with an app that lists the tool", name, allowed)
}

// toolScope is the scope of a session: its app's listed tools, or the
// operator's choice for sessions without an app.
func (h *API) toolScope(ctx context.Context, appID string) (toolScope, error) {
	if appID == "" || appID == sessions.NoApp {
		listed := h.ServiceTools
		if listed == nil {
			listed = DefaultServiceTools
		}
		return toolScope{listed: listed}, nil
	}
	a, err := h.Apps.Get(ctx, appID)
	if err != nil {
		return toolScope{}, fmt.Errorf("read the session's app %s: %w", appID, err)
	}
	// The tools of the graph the app's chats run: a tool added to the
	// draft reaches sessions once it is published, as it reaches chats.
	g, _, err := h.Apps.Running(ctx, a)
	if err != nil {
		return toolScope{}, fmt.Errorf("read the session's app %s: %w", appID, err)
	}
	scope := toolScope{app: true}
	for _, n := range g.Nodes {
		raw, ok := n.Inputs["tools"]
		if n.Type != "tools" || !ok {
			continue
		}
		var names []string
		if json.Unmarshal(raw, &names) != nil {
			continue // the graph's check at save refuses such a node
		}
		scope.listed = append(scope.listed, names...)
	}
	return scope, nil
}

// offered keeps the tools a scope allows.
func (s toolScope) offered(tools []registry.Tool) []registry.Tool {
	out := tools[:0:0]
	for _, t := range tools {
		if s.allows(t.Name) {
			out = append(out, t)
		}
	}
	return out
}
