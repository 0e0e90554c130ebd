package toolcall

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// Workspace describes a chat's uploaded and intermediate files to the
// model (K3), read on the host: it never starts the sandbox.
type Workspace interface {
	// Summary lists the first files of the chat's uploads and
	// intermediate directories as the sandbox sees them, with sizes and
	// a count of the rest; "" when there are none.
	Summary(ctx context.Context, scope sandbox.Scope) (string, error)
}

// workspacePrompt tells the model where the chat's files are and what is
// there now, and which skills it has: built every turn from the host,
// without starting the sandbox.
func (n *Node) workspacePrompt(ctx context.Context, scope sandbox.Scope, allowed []string, useSandbox bool) string {
	var b strings.Builder
	if useSandbox && n.cfg.Workspace != nil {
		fmt.Fprintf(&b, "- The user's uploaded files are in %s; write results and intermediate files to %s, where the user can download them; %s is read-only\n",
			sandbox.UploadsDir, sandbox.IntermediateDir, sandbox.SkillsDir)
		if s, err := n.cfg.Workspace.Summary(ctx, scope); err == nil && s != "" {
			b.WriteString(s)
			if !strings.HasSuffix(s, "\n") {
				b.WriteString("\n")
			}
		}
	}
	if skills := n.usableSkills(ctx, scope, allowed); len(skills) > 0 {
		fmt.Fprintf(&b, "\nSkills you may use (load one with %s before you use it):\n", registry.LoadSkillName)
		for _, s := range skills {
			fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Description)
		}
	}
	return b.String()
}

// usableSkills are the installed skills among those allowed, as
// list_skills gives them.
func (n *Node) usableSkills(ctx context.Context, scope sandbox.Scope, allowed []string) []registry.SkillInfo {
	if len(allowed) == 0 {
		return nil
	}
	t, err := n.cfg.Tools.Lookup(ctx, scope, registry.SkillListTool.Name)
	if err != nil {
		return nil
	}
	res, err := n.cfg.Tools.Execute(ctx, t, registry.Call{Scope: scope, Params: json.RawMessage(`{}`), Skills: allowed})
	if err != nil {
		return nil
	}
	list, _ := res.Output.(registry.SkillList)
	return list.Skills
}
