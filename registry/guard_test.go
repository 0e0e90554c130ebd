package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/redact"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestGuard: a host program and a destructive tool meet the app's
// policy as a command would (forbid refuses and is audited, ask waits
// for exactly the line a person approves), and what passes no sandbox
// chain is redacted.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	store, err := audit.New(ctx, mongotest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	w := audit.NewWriter(audit.WriterConfig{Store: store, Linger: -1})
	defer w.Close()
	decide := map[string]policy.Decision{"app-forbid": policy.Forbid, "app-ask": policy.Ask, "app-allow": policy.Allow}
	verdict := func(appID string) policy.Verdict {
		return policy.Verdict{Decision: decide[appID], Rule: "rule-of-" + appID, Justification: "because"}
	}
	redactor, err := redact.New(redact.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g := registry.Guard{Audit: w, Instance: "test",
		Judge:     func(ctx context.Context, appID, command string) policy.Verdict { return verdict(appID) },
		JudgeTool: func(ctx context.Context, appID string) policy.Verdict { return verdict(appID) },
		Redactor:  func(ctx context.Context, appID string) *redact.Redactor { return redactor }}
	call := func(appID, approved string) registry.Call {
		return registry.Call{Scope: sandbox.Scope{AppID: appID, UserID: "u", ChatID: "c"}, Approved: approved,
			Actor: sandbox.Actor{UserID: "u", Kind: sandbox.ActorAgent}, Params: json.RawMessage(`{"path":"x"}`)}
	}
	wipe := registry.Tool{Name: "exec:wipe", Destructive: true}
	line := `exec:wipe {"path":"x"}`
	for _, tc := range []struct {
		name       string
		err        error
		refused    bool
		askedAbout string
	}{
		{"host program forbidden", g.Command(ctx, call("app-forbid", ""), "wipe", "disk.wipe", "/bin/wipe --all"), true, ""},
		{"host program asks", g.Command(ctx, call("app-ask", ""), "wipe", "disk.wipe", "/bin/wipe --all"), false, "/bin/wipe --all"},
		{"host program approved", g.Command(ctx, call("app-ask", "/bin/wipe --all"), "wipe", "disk.wipe", "/bin/wipe --all"), false, ""},
		{"host program approved as another line", g.Command(ctx, call("app-ask", "/bin/wipe"), "wipe", "disk.wipe", "/bin/wipe --all"), false, "/bin/wipe --all"},
		{"host program allowed", g.Command(ctx, call("app-allow", ""), "wipe", "disk.wipe", "/bin/wipe --all"), false, ""},
		{"destructive tool forbidden", g.Destructive(ctx, wipe, call("app-forbid", "")), true, ""},
		{"destructive tool asks", g.Destructive(ctx, wipe, call("app-ask", "")), false, line},
		{"destructive tool approved", g.Destructive(ctx, wipe, call("app-ask", line)), false, ""},
		{"a tool that destroys nothing", g.Destructive(ctx, registry.Tool{Name: "file:read"}, call("app-forbid", "")), false, ""},
	} {
		var refused *sandbox.RefusedError
		var ask *policy.AskError
		switch {
		case tc.refused != (errors.As(tc.err, &refused) && !errors.As(tc.err, &ask)):
			t.Errorf("%s: err %v, refused %v", tc.name, tc.err, tc.refused)
		case tc.askedAbout != "" && (!errors.As(tc.err, &ask) || ask.Command != tc.askedAbout):
			t.Errorf("%s: err %v, want a question about %q", tc.name, tc.err, tc.askedAbout)
		case !tc.refused && tc.askedAbout == "" && tc.err != nil:
			t.Errorf("%s: err %v, want it to pass", tc.name, tc.err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := store.Query(ctx, audit.Filter{AppID: "app-forbid"}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 2 {
		t.Fatalf("audit of the forbidden app: %+v, want the refused program and the refused tool", page.Records)
	}
	for _, r := range page.Records {
		if r.Decision != audit.Refused || r.Status != audit.StatusRefused || r.Rule != "rule-of-app-forbid" || r.Instance != "test" || r.ChatID != "c" {
			t.Errorf("audit record %+v, want a refusal under the rule", r)
		}
	}
	if page, _ := store.Query(ctx, audit.Filter{AppID: "app-ask"}, "", 10); len(page.Records) != 0 {
		t.Errorf("a question was audited as if it ran: %+v", page.Records)
	}
	secret := "token=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4Ab3dE6gH9jK2mN5pQ8sT1vW4"
	if got := g.Redact(ctx, "app-allow", secret); got == secret {
		t.Errorf("Redact left a secret: %s", got)
	}
	if got := (registry.Guard{}).Redact(ctx, "app-allow", secret); got != secret {
		t.Errorf("a guard without redaction changed the text: %s", got)
	}
}
