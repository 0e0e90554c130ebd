package apps

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
)

// TestWhatTheSandboxReadsOfAnApp: an app's policy document, its startup
// and shutdown commands and its owner, as the sandbox layer reads them;
// an app that is gone has none of them, and no error.
func TestWhatTheSandboxReadsOfAnApp(t *testing.T) {
	ctx := context.Background()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	s := New(mongotest.DB(t), ts)
	g := DemoGraph()
	g.Nodes[1].Inputs["policy"] = json.RawMessage(` {"rules": []} `)
	g.Nodes[1].Inputs["startupCommands"] = json.RawMessage(`["pip install pandas", "mkdir -p out"]`)
	g.Nodes[1].Inputs["shutdownCommands"] = json.RawMessage(`["rm -rf out/tmp"]`)
	if err := s.Put(ctx, App{ID: "a", Name: "a", OwnerID: "owner-1", Graph: g}, time.Now()); err != nil {
		t.Fatal(err)
	}
	plain := DemoGraph()
	if err := s.Put(ctx, App{ID: "plain", Name: "plain", OwnerID: "owner-2", Graph: plain}, time.Now()); err != nil {
		t.Fatal(err)
	}

	if doc, err := s.PolicyDocument(ctx, "a"); err != nil || string(doc) != `{"rules":[]}` {
		t.Errorf("a's policy document %s, %v", doc, err)
	}
	for _, id := range []string{"plain", "gone"} {
		if doc, err := s.PolicyDocument(ctx, id); err != nil || doc != nil {
			t.Errorf("%s's policy document %s, %v; want none", id, doc, err)
		}
	}

	l := Lifecycle{Apps: s}
	scope := sandbox.Scope{AppID: "a", UserID: "u", ChatID: "c"}
	if cmds, err := l.StartupCommands(ctx, scope); err != nil || !slices.Equal(cmds, []string{"pip install pandas", "mkdir -p out"}) {
		t.Errorf("startup commands %q, %v", cmds, err)
	}
	if cmds, err := l.ShutdownCommands(ctx, scope); err != nil || !slices.Equal(cmds, []string{"rm -rf out/tmp"}) {
		t.Errorf("shutdown commands %q, %v", cmds, err)
	}
	if cmds, err := l.StartupCommands(ctx, sandbox.Scope{AppID: "gone"}); err != nil || cmds != nil {
		t.Errorf("a gone app's startup commands %q, %v; want none", cmds, err)
	}

	if o, err := s.OwnerOf(ctx, "a"); err != nil || o != "owner-1" {
		t.Errorf("a's owner %q, %v", o, err)
	}
	if o, err := s.OwnerOf(ctx, "gone"); err != nil || o != "" {
		t.Errorf("a gone app's owner %q, %v; want none", o, err)
	}

	problems := CheckPolicies(g, func(raw []byte) error {
		if strings.Contains(string(raw), "rules") {
			return errors.New("too loose")
		}
		return nil
	})
	if len(problems) != 1 || problems[0].NodeID != g.Nodes[1].NodeID || problems[0].Field != "policy" || !strings.Contains(problems[0].Message, "too loose") {
		t.Errorf("problems %q, want the node's", problems)
	}
	plain.Nodes[1].Inputs["policy"] = json.RawMessage(`null`)
	if problems := CheckPolicies(plain, func([]byte) error { return errors.New("checked") }); problems != nil {
		t.Errorf("a null policy was checked: %q", problems)
	}
}
