package web_test

// The audit of sandbox calls through the product as engine serve builds
// it: every outcome of the model's commands gives one record with the
// right status (success, failed, timed out, refused by a policy, refused
// by a cap, a client gone mid-command, a provider that cannot start the
// sandbox), the commands' metric, the admin API's filters, pages and
// export, the app owner's view, and the daily prune.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/workers"
)

// auditPage is the admin API's answer.
// auditRecord is one record as the audit API gives it.
type auditRecord struct {
	ID, Kind, ActorID, ActorKind, ToolCallID, AppID, ChatID, UserID, SandboxID string
	Tool, Command, Op, Path, Decision, Rule, Reason, Status, Error, Transcript string
	ExitCode                                                                   int
	StdoutBytes, StderrBytes, Bytes                                            int64
	TimedOut, Truncated                                                        bool
	Time                                                                       time.Time
}

type auditPage struct {
	Records    []auditRecord `json:"records"`
	NextCursor string        `json:"nextCursor"`
}

func getAudit(t *testing.T, c *enginetest.Client, path string, q url.Values) auditPage {
	t.Helper()
	resp := c.Do(t, "GET", path+"?"+q.Encode(), nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), resp.Status, clipped(resp.Body))
	}
	var p auditPage
	resp.JSON(t, &p)
	return p
}

// refuseForbidden stands in for the command policy, a link of the chain
// inside the audit: it refuses commands that mention "forbidden" as the
// policy refuses them, with a *sandbox.RefusedError.
var refuseForbidden = sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
	return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
		if strings.Contains(call.Request.Command, "forbidden") {
			err := &sandbox.RefusedError{Rule: "no-forbidden", Justification: "the test's policy forbids it"}
			return sandbox.ExecResult{ExitCode: -1, Stderr: err.Error()}, err
		}
		return next(ctx, call)
	}
}}

// TestAuditOutcomes: N commands of every outcome give N records with
// the outcome's status, decision and rule, counted by result in
// /metrics.
func TestAuditOutcomes(t *testing.T) {
	t.Parallel()
	var calls []llm.ToolCall
	add := func(n int, args string) {
		for range n {
			calls = append(calls, llmtest.Call(fmt.Sprintf("call_%d", len(calls)), "sandbox_shell", args))
		}
	}
	add(3, `{"command":"echo ok"}`)
	add(3, `{"command":"echo failing >&2; exit 3"}`)
	add(2, `{"command":"sleep 3","timeout":1}`)
	add(2, `{"command":"echo forbidden"}`)
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: calls}, llmtest.Reply{Text: "done"}, // chat "runs"
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("gone_1", "sandbox_shell", `{"command":"echo started; sleep 5","timeout":60}`)}},        // chat "gone"
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("cap_1", "sandbox_shell", `{"command":"echo capped"}`)}}, llmtest.Reply{Text: "capped"}, // chat "capped"
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("down_1", "sandbox_shell", `{"command":"echo down"}`)}}, // chat "down"
	)
	env := enginetest.Start(t, enginetest.Options{
		Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL,
			// Two running sandboxes on the server: the third chat is
			// refused (at a user's own cap an idle one would be stopped).
			"FLOWBOX_CAP_SANDBOXES": "2"},
		Middleware: []sandbox.Middleware{refuseForbidden},
	})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	graph := apps.DemoGraph()
	graph.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	resp := admin.Do(t, "POST", "/api/apps", map[string]any{"name": "scripted", "public": false, "graph": graph})
	var app struct {
		ID string `json:"appId"`
	}
	resp.JSON(t, &app)
	if resp.Status != http.StatusCreated || app.ID == "" {
		t.Fatalf("create the scripted app: %d %s", resp.Status, resp.Body)
	}
	service := env.Bearer(enginetest.ServiceKey)
	body := func(chat, user string) string {
		return fmt.Sprintf(`{"appId":%q,"chatId":%q,"customUid":%q,"stream":true,"detail":true,"messages":[{"role":"user","content":"go"}]}`, app.ID, chat, user)
	}
	ctx := context.Background()
	svc := env.Engine.Services
	records := func(chat string) auditPage {
		t.Helper()
		if err := svc.AuditWriter.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return getAudit(t, admin, "/admin/api/audit", url.Values{"chat": {chat}, "limit": {"500"}})
	}

	// Success, failure, timeouts and policy refusals in one turn.
	resp2 := chatAPIPost(t, ctx, service, body("runs", "api"))
	chatAPIReadSSE(t, resp2.Body, nil)
	got := map[audit.Status]int{}
	for _, r := range records("runs").Records {
		got[audit.Status(r.Status)]++
		if r.Kind != "command" || r.Tool != "sandbox_shell" || r.ActorKind != "agent" || r.ActorID != "api" || r.UserID != "api" ||
			r.AppID != app.ID || r.SandboxID != sandbox.IDFor(app.ID, "api", "runs") || !strings.HasPrefix(r.ToolCallID, "call_") {
			t.Errorf("record %+v does not say who, where and through which tool", r)
		}
		switch r.Status {
		case "success":
			if r.Command != "echo ok" || r.ExitCode != 0 || r.StdoutBytes != 3 || r.Decision != "allowed" {
				t.Errorf("success record %+v", r)
			}
		case "failed":
			if r.ExitCode != 3 || r.StderrBytes != int64(len("failing\n")) {
				t.Errorf("failed record %+v, want exit 3 and 8 bytes of stderr", r)
			}
		case "timed_out":
			if !r.TimedOut || r.Command != "sleep 3" {
				t.Errorf("timed out record %+v", r)
			}
		case "refused":
			if r.Decision != "refused" || r.Rule != "no-forbidden" || r.Reason != "the test's policy forbids it" {
				t.Errorf("refused record %+v, want the rule and its reason", r)
			}
		}
	}
	want := map[audit.Status]int{audit.StatusSuccess: 3, audit.StatusFailed: 3, audit.StatusTimedOut: 2, audit.StatusRefused: 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records of chat runs by status: %v, want %v", got, want)
	}

	// A client that leaves while its command runs: the command is
	// killed, and its record is still written.
	cctx, cancel := context.WithCancel(ctx)
	resp3 := chatAPIPost(t, cctx, service, body("gone", "api"))
	chatAPIReadSSE(t, resp3.Body, func(ev sseEvent) bool { return ev.name != "toolOutput" })
	cancel()
	// The command ends when the kill lands; a bound for a loaded machine.
	var gone auditPage
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if gone = records("gone"); len(gone.Records) > 0 {
			break
		}
	}
	if len(gone.Records) != 1 || gone.Records[0].Status != "client_gone" || gone.Records[0].Command != "echo started; sleep 5" {
		t.Fatalf("records of the abandoned command: %+v, want one with status client_gone", gone.Records)
	}

	// A third sandbox passes the cap: refused, recorded.
	chatAPIReadSSE(t, chatAPIPost(t, ctx, service, body("capped", "api")).Body, nil)
	capped := records("capped")
	if len(capped.Records) != 1 || capped.Records[0].Status != "limited" || capped.Records[0].Decision != "refused" || capped.Records[0].Rule != "cap:global" {
		t.Fatalf("records of the capped chat: %+v, want one limited by cap:global", capped.Records)
	}

	// The provider cannot create sandboxes (its directory is gone): the
	// command of a new chat is unavailable, and recorded so. (A place
	// under the server's cap first: the chat "runs" is stopped.)
	if err := svc.Manager.Stop(ctx, sandbox.IDFor(app.ID, "api", "runs")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(env.Config.Sandbox.Root, "bwrap")
	if err := os.Rename(root, root+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	chatAPIReadSSE(t, chatAPIPost(t, ctx, service, body("down", "someone-else")).Body, nil)
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(root+".away", root); err != nil {
		t.Fatal(err)
	}
	down := records("down")
	if len(down.Records) != 1 || down.Records[0].Status != "unavailable" || down.Records[0].ExitCode != -1 {
		t.Fatalf("records of the chat whose sandbox could not start: %+v, want one unavailable", down.Records)
	}

	// The metric counts the same.
	metrics := string(env.Anonymous().Do(t, "GET", "/metrics", nil).Body)
	for result, n := range map[string]int{"success": 3, "failed": 3, "timed_out": 2, "refused": 3, "error": 2} {
		line := regexp.MustCompile(`(?m)^flowbox_sandbox_commands_total\{result="` + result + `"\} (\d+)$`).FindStringSubmatch(metrics)
		if line == nil || line[1] != fmt.Sprint(n) {
			t.Errorf("flowbox_sandbox_commands_total{result=%q} = %v, want %d", result, line, n)
		}
	}
	if !strings.Contains(metrics, "flowbox_audit_write_failures_total 0") {
		t.Errorf("/metrics has no flowbox_audit_write_failures_total at 0")
	}
}

// TestAuditAdminAPI: the filters select what they name, the pages of the
// cursor hold every record once, newest first, the export streams them
// as JSON lines, app owners read their app's records only, and the daily
// prune deletes the records past the retention.
func TestAuditAdminAPI(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_AUDIT_RETENTION": "15d"}})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	resp := alice.Do(t, "POST", "/api/apps", map[string]any{"name": "alice's", "public": true, "graph": apps.DemoGraph()})
	var app struct {
		ID string `json:"appId"`
	}
	resp.JSON(t, &app)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create alice's app: %d %s", resp.Status, resp.Body)
	}

	// 600 records over 30 days: every third of alice's app, every fifth
	// refused, one in ten a file operation.
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var recs []audit.Record
	for i := range 600 {
		r := audit.Record{Time: now.Add(-time.Duration(i) * 72 * time.Minute), Kind: audit.KindCommand, AppID: "other", UserID: "u:x", ChatID: fmt.Sprint("c", i%7),
			Tool: "sandbox_shell", Command: fmt.Sprint("echo ", i), Decision: audit.Allowed, Status: audit.StatusSuccess}
		if i%3 == 0 {
			r.AppID = app.ID
		}
		if i%5 == 0 {
			r.Decision, r.Status, r.Rule = audit.Refused, audit.StatusRefused, "r"
		}
		if i%10 == 1 {
			r.Kind, r.Op, r.Path, r.Command = audit.KindFile, "read", "/workspace/x", ""
		}
		// A few commands met their sandbox's limits.
		r.OOMKilled, r.PidsLimited = i%50 == 7, i%100 == 9
		recs = append(recs, r)
	}
	if err := env.Engine.Services.Audit.Insert(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	count := func(c *enginetest.Client, path string, q url.Values) (int, int) {
		t.Helper()
		n, pages := 0, 0
		var last time.Time
		for {
			p := getAudit(t, c, path, q)
			pages++
			for _, r := range p.Records {
				if !last.IsZero() && r.Time.After(last) {
					t.Fatalf("%s: %s after %s: not newest first", path, r.Time, last)
				}
				last = r.Time
			}
			n += len(p.Records)
			if p.NextCursor == "" {
				return n, pages
			}
			q.Set("cursor", p.NextCursor)
		}
	}
	day := 24 * time.Hour
	tests := []struct {
		name  string
		q     url.Values
		want  int
		pages int
	}{
		{"all, by 500", url.Values{"limit": {"500"}}, 600, 2},
		{"all, by the default 50", url.Values{}, 600, 12},
		{"app", url.Values{"app": {app.ID}, "limit": {"100"}}, 200, 2},
		{"refused", url.Values{"decision": {"refused"}, "limit": {"500"}}, 120, 1},
		{"status", url.Values{"status": {"refused"}, "limit": {"500"}}, 120, 1},
		{"files", url.Values{"kind": {"file"}, "limit": {"500"}}, 60, 1},
		{"OOM kills", url.Values{"exhausted": {"oom"}, "limit": {"500"}}, 12, 1},
		{"pids limit hits", url.Values{"exhausted": {"pids"}, "limit": {"500"}}, 6, 1},
		{"chat and user", url.Values{"chat": {"c3"}, "user": {"u:x"}, "limit": {"500"}}, 86, 1},
		{"last 10 days", url.Values{"since": {now.Add(-10 * day).Format(time.RFC3339)}, "limit": {"500"}}, 201, 1},
		{"days 10 to 20", url.Values{"since": {now.Add(-20 * day).Format(time.RFC3339)}, "until": {now.Add(-10 * day).Format(time.RFC3339)}, "limit": {"500"}}, 200, 1},
	}
	for _, tc := range tests {
		if n, pages := count(admin, "/admin/api/audit", tc.q); n != tc.want || pages != tc.pages {
			t.Errorf("%s: %d records in %d pages, want %d in %d", tc.name, n, pages, tc.want, tc.pages)
		}
	}
	for _, q := range []string{"limit=501", "limit=0", "cursor=nonsense", "status=fine", "decision=maybe", "kind=x", "exhausted=cpu", "since=yesterday"} {
		if resp := admin.Do(t, "GET", "/admin/api/audit?"+q, nil); resp.Status != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", q, resp.Status, clipped(resp.Body))
		}
	}

	// The export: every selected record, one JSON object a line.
	r, err := admin.Send("GET", "/admin/api/audit/export?decision=refused", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Disposition"), "attachment;") {
		t.Fatalf("export: %d, Content-Disposition %q", r.StatusCode, r.Header.Get("Content-Disposition"))
	}
	lines := 0
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		var rec struct{ Decision, Rule string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Decision != "refused" || rec.Rule != "r" {
			t.Fatalf("export line %d: %s (%v)", lines, sc.Text(), err)
		}
		lines++
	}
	if lines != 120 {
		t.Errorf("export: %d lines, want 120", lines)
	}

	// Alice reads her app's records, whatever app she names; bob, who may
	// use the app, may not read them.
	if n, _ := count(alice, "/api/apps/"+app.ID+"/audit", url.Values{"app": {"other"}, "limit": {"500"}}); n != 200 {
		t.Errorf("alice reads %d records of her app, want 200", n)
	}
	if resp := bob.Do(t, "GET", "/api/apps/"+app.ID+"/audit", nil); resp.Status != http.StatusForbidden {
		t.Errorf("bob reads alice's app's audit: %d, want 403", resp.Status)
	}

	// The daily prune keeps 15 days.
	if err := env.Engine.Workers.HandleAuditPrune(ctx, workers.NewAuditPruneTask()); err != nil {
		t.Fatal(err)
	}
	if n, _ := count(admin, "/admin/api/audit", url.Values{"limit": {"500"}}); n != 300 {
		t.Errorf("after the prune: %d records, want the 300 of the last 15 days", n)
	}

	// The page: the browser app's audit page, its status filter offering
	// every status.
	page := admin.Do(t, "GET", "/admin/audit", nil)
	if page.Status != http.StatusOK {
		t.Fatalf("GET /admin/audit: %d %s", page.Status, clipped(page.Body))
	}
	name, data := readAppPage[struct {
		Statuses []string `json:"statuses"`
	}](t, page.Body)
	if name != "audit" || !slices.Contains(data.Statuses, "client_gone") {
		t.Errorf("GET /admin/audit: page %q with statuses %q, want the audit page offering client_gone", name, data.Statuses)
	}
}
