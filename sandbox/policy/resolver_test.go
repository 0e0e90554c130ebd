package policy_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/redact"
)

// TestReadmePolicyExample: the policy docs/POLICY.md shows is one the engine
// accepts, as an operator's file and as an app's.
func TestReadmePolicyExample(t *testing.T) {
	readme, err := os.ReadFile("../../docs/POLICY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "**Command policy**")
	if !ok {
		t.Fatal("docs/POLICY.md has no **Command policy** paragraph")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/POLICY.md's command policy paragraph has no JSON example")
	}
	p, rc, err := policy.ParseDocument([]byte(example))
	if err != nil {
		t.Fatalf("the docs' example is refused: %v", err)
	}
	if _, err := redact.New(rc); err != nil {
		t.Fatalf("the docs' example's redaction is refused: %v", err)
	}
	if len(p.Rules) != 2 || len(p.Egress) != 2 {
		t.Errorf("parsed %+v", p)
	}
	// As an app's policy over the default operator's.
	r, err := policy.NewResolver(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check([]byte(example)); err != nil {
		t.Errorf("the docs' example as an app's policy: %v", err)
	}
}

// apps is a set of apps' policy documents that may change or fail.
type apps struct {
	mu   sync.Mutex
	docs map[string]string
	fail error
}

func (a *apps) doc(ctx context.Context, appID string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return nil, a.fail
	}
	d, ok := a.docs[appID]
	if !ok {
		return nil, nil
	}
	return []byte(d), nil
}

// TestResolver: an app's policy tightens the operator's, a change of
// the app's document takes effect on its next call, an app whose
// document cannot be read is refused, and a looser document is refused
// when it is saved.
func TestResolver(t *testing.T) {
	ctx := context.Background()
	a := &apps{docs: map[string]string{
		"strict": `{"rules": [{"id": "no-git", "command": "git", "decision": "forbid", "justification": "not here"}],
			"limits": {"timeoutSeconds": 10, "memoryMiB": 256, "toolCallsPerRun": 3, "toolCallsPerChat": 9},
			"destructiveTools": "ask", "egress": ["pypi.org"]}`,
		"closed": `{"egress": []}`,
	}}
	r, err := policy.NewResolver([]byte(`{"limits": {"timeoutSeconds": 60, "memoryMiB": 512}}`), a.doc)
	if err != nil {
		t.Fatal(err)
	}
	if v := r.JudgeHost(ctx, "strict", "git status"); v.Decision != policy.Forbid || v.Rule != "no-git" {
		t.Errorf("strict app, git: %+v, want its rule to forbid it", v)
	}
	if v := r.JudgeHost(ctx, "plain", "git status"); v.Decision == policy.Forbid {
		t.Errorf("an app without a policy, git: %+v, want the operator's policy (which allows it)", v)
	}
	if v := r.JudgeTool(ctx, "strict"); v.Decision != policy.Ask || v.Justification == "" {
		t.Errorf("strict app, destructive tool: %+v, want ask with a reason", v)
	}
	if l := r.LimitsFor(ctx, sandbox.Scope{AppID: "strict"}); l.MemoryMiB != 256 {
		t.Errorf("strict app's limits %+v, want its 256 MiB", l)
	}
	if l := r.LimitsFor(ctx, sandbox.Scope{AppID: "plain"}); l.MemoryMiB != 512 {
		t.Errorf("plain app's limits %+v, want the operator's 512 MiB", l)
	}
	if run, chat := r.ToolCallLimits(ctx, "strict"); run != 3 || chat != 9 {
		t.Errorf("strict app's tool-call limits %d, %d; want 3, 9", run, chat)
	}
	if e := r.EgressFor(ctx, sandbox.Scope{AppID: "strict"}); len(e) != 1 || e[0] != "pypi.org" {
		t.Errorf("strict app's egress %v", e)
	}
	if e := r.EgressFor(ctx, sandbox.Scope{AppID: "closed"}); e == nil || len(e) != 0 {
		t.Errorf("closed app's egress %v, want none (not the operator's)", e)
	}
	if e := r.EgressFor(ctx, sandbox.Scope{AppID: "plain"}); e != nil {
		t.Errorf("plain app's egress %v, want nil: the operator's", e)
	}

	// A change of the app's document is read on its next call.
	a.mu.Lock()
	a.docs["strict"] = `{}`
	a.mu.Unlock()
	if v := r.JudgeHost(ctx, "strict", "git status"); v.Decision == policy.Forbid {
		t.Errorf("after its rule was removed: %+v", v)
	}

	// Unreadable: refused, never the operator's looser policy.
	a.mu.Lock()
	a.fail = errors.New("database down")
	a.mu.Unlock()
	if v := r.JudgeHost(ctx, "strict", "ls"); v.Decision != policy.Forbid || !strings.Contains(v.Justification, "database down") {
		t.Errorf("unreadable app, ls: %+v, want it refused with the reason", v)
	}
	if v := r.JudgeTool(ctx, "strict"); v.Decision != policy.Forbid {
		t.Errorf("unreadable app, destructive tool: %+v, want it refused", v)
	}
	if e := r.EgressFor(ctx, sandbox.Scope{AppID: "strict"}); e == nil || len(e) != 0 {
		t.Errorf("unreadable app's egress %v, want none", e)
	}

	// Saving: a looser document, or a broken one, is refused.
	if err := r.Check([]byte(`{"limits": {"timeoutSeconds": 120}}`)); err == nil || !strings.Contains(err.Error(), "loosens") {
		t.Errorf("a looser timeout: %v, want it refused as loosening the operator's", err)
	}
	if err := r.Check([]byte(`{"rules": "no"}`)); err == nil {
		t.Error("a broken document was accepted")
	}
	if _, err := policy.LoadResolver("/nonexistent/policy.json", nil); err == nil || !strings.Contains(err.Error(), "FLOWBOX_POLICY_FILE") {
		t.Errorf("a missing operator's file: %v, want an error naming the setting", err)
	}
}
