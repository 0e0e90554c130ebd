package engine

import (
	"context"

	"github.com/flowbox/flowbox/chats/preview"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/registry/exectool"
	"github.com/flowbox/flowbox/registry/mcptool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/web/admin"
)

// newRegistry is the engine's one tool registry (A3): the sandbox's
// shell and files, the skills, the operator's exec tools (also by their
// bare names) and the admins' MCP servers. The tool-call node and the
// sandbox service API both run tools from it.
func newRegistry(svc *Services, deleteSession func(ctx context.Context, scope sandbox.Scope) error) *registry.Registry {
	guard := registry.Guard{Audit: svc.AuditWriter, Instance: audit.DefaultInstance()}
	if svc.Policy != nil {
		guard.Redactor, guard.Judge, guard.JudgeTool = svc.Policy.RedactorFor, svc.Policy.JudgeHost, svc.Policy.JudgeTool
	}
	exec := exectool.NewBackend(svc.ExecTools, svc.Manager, guard)
	reg := registry.New(exec,
		registry.Shell{Sandboxes: svc.Manager, Delete: deleteSession, Previews: previewLink(svc.Previews)},
		registry.Files{Sandboxes: svc.Manager},
		registry.Skills{Catalog: svc.Skills, Sandboxes: svc.Manager},
		exec,
		mcptool.NewBackend(svc.MCPServers, svc.MCP, guard))
	reg.Before = guard.Destructive
	return reg
}

// execToolInfo describes the exec tools for builders.
func execToolInfo(tools []*exectool.Tool) []admin.ExecToolInfo {
	out := make([]admin.ExecToolInfo, len(tools))
	for i, t := range tools {
		out[i] = admin.ExecToolInfo{Name: t.Name(), Description: t.Description(), RunIn: string(t.RunIn()), ReadOnly: t.ReadOnly(),
			Destructive: t.Destructive(), ConcurrencySafe: t.ConcurrencySafe()}
	}
	return out
}

// previewLink is the path of a chat's preview link to a port, made when
// it has none.
func previewLink(links *preview.Store) func(ctx context.Context, scope sandbox.Scope, port int) (string, error) {
	return func(ctx context.Context, scope sandbox.Scope, port int) (string, error) {
		l, err := links.Issue(ctx, scope, port)
		return l.Path(), err
	}
}
