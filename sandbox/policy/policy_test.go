package policy

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := `{
	  "mode": "allowlist",
	  "useBuiltinDenylist": true,
	  "rules": [
	    {"id": "tools", "command": ["ls", "cat"], "decision": "allow", "justification": "reading files"},
	    {"id": "push", "command": "git", "args": [{"equals": "push", "position": 1}, {"option": ["-f", "--force"]}], "decision": "ask", "justification": "force pushes rewrite history"},
	    {"id": "dev", "command": "*", "redirect": "/dev/sd*", "decision": "forbid", "justification": "devices"}
	  ],
	  "limits": {"timeoutSeconds": 60, "memoryMiB": 512, "cpus": 0.5, "pids": 128, "outputBytes": 65536, "toolCallsPerRun": 20, "toolCallsPerChat": 500}
	}`
	p, err := Parse([]byte(good))
	if err != nil {
		t.Fatalf("Parse(good): %v", err)
	}
	if p.Mode != Allowlist || len(p.Rules) != 3 || p.Rules[1].Command[0] != "git" || p.Limits.CPUs != 0.5 {
		t.Errorf("Parse(good) = %+v", p)
	}
	if _, err := Parse(builtinJSON); err != nil {
		t.Errorf("built-in denylist: %v", err)
	}
	bad := []struct{ name, doc, want string }{
		{"mode", `{"mode": "blocklist"}`, "/mode"},
		{"decision", `{"rules": [{"id": "a", "command": "ls", "decision": "deny", "justification": "x"}]}`, "/rules/0/decision"},
		{"no command", `{"rules": [{"id": "a", "decision": "forbid", "justification": "x"}]}`, "/rules/0"},
		{"justification", `{"rules": [{"id": "a", "command": "ls", "decision": "forbid"}]}`, "justification"},
		{"id", `{"rules": [{"id": "Bad Id", "command": "ls", "decision": "forbid", "justification": "x"}]}`, "/rules/0/id"},
		{"two matchers", `{"rules": [{"id": "a", "command": "ls", "args": [{"equals": "x", "prefix": "y"}], "decision": "forbid", "justification": "x"}]}`, "/rules/0/args/0"},
		{"unknown field", `{"rules": [], "extra": 1}`, "extra"},
		{"timeout", `{"limits": {"timeoutSeconds": 0}}`, "/limits/timeoutSeconds"},
		{"cpus", `{"limits": {"cpus": -1}}`, "/limits/cpus"},
		{"duplicate id", `{"rules": [{"id": "a", "command": "ls", "decision": "forbid", "justification": "x"}, {"id": "a", "command": "cat", "decision": "forbid", "justification": "x"}]}`, `"a"`},
		{"option", `{"rules": [{"id": "a", "command": "ls", "args": [{"option": "r"}], "decision": "forbid", "justification": "x"}]}`, "option"},
		{"not json", `{"rules": [`, "not JSON"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%s) error = %v; want one naming %q", tc.doc, err, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	yes, no := true, false
	base := Policy{Mode: Allowlist, Rules: []Rule{
		{ID: "tools", Command: Globs{"ls", "cat", "git"}, Decision: Allow, Justification: "x"},
		{ID: "rm", Command: Globs{"rm"}, Args: []ArgMatch{{Prefix: Globs{"/workspace/"}}}, Decision: Allow, Justification: "x"},
	}, Limits: Limits{TimeoutSeconds: 60, MemoryMiB: 512}}

	t.Run("tightens", func(t *testing.T) {
		app := Policy{Rules: []Rule{
			{ID: "only-ls", Command: Globs{"ls"}, Decision: Allow, Justification: "x"},
			{ID: "rm-tmp", Command: Globs{"rm"}, Args: []ArgMatch{{Prefix: Globs{"/workspace/"}}, {Prefix: Globs{"/workspace/tmp/"}}}, Decision: Allow, Justification: "x"},
			{ID: "no-cat", Command: Globs{"cat"}, Decision: Forbid, Justification: "x"},
		}, Limits: Limits{TimeoutSeconds: 10, Pids: 64}}
		m, err := Merge(base, app)
		if err != nil {
			t.Fatal(err)
		}
		if m.Limits.TimeoutSeconds != 10 || m.Limits.MemoryMiB != 512 || m.Limits.Pids != 64 {
			t.Errorf("limits = %+v", m.Limits)
		}
		for cmd, want := range map[string]Decision{"ls": Allow, "git status": Forbid, "cat x": Forbid, "rm /workspace/tmp/a": Allow} {
			if v := m.Judge(cmd, nil); v.Decision != want {
				t.Errorf("merged Judge(%q) = %+v, want %s", cmd, v, want)
			}
		}
	})
	t.Run("denylist app on denylist base", func(t *testing.T) {
		m, err := Merge(Policy{Limits: Limits{TimeoutSeconds: 30}}, Policy{Rules: []Rule{{ID: "no-curl", Command: Globs{"curl"}, Decision: Forbid, Justification: "x"}}})
		if err != nil {
			t.Fatal(err)
		}
		if v := m.Judge("curl x", nil); v.Rule != "no-curl" {
			t.Errorf("got %+v", v)
		}
		if v := m.Judge("rm -rf /", nil); v.Rule != "rm-root" {
			t.Errorf("built-in lost: %+v", v)
		}
	})
	t.Run("app allowlist on denylist base", func(t *testing.T) {
		m, err := Merge(Policy{}, Policy{Mode: Allowlist, Rules: []Rule{{ID: "ls", Command: Globs{"ls"}, Decision: Allow, Justification: "x"}}})
		if err != nil || m.Mode != Allowlist {
			t.Fatalf("Merge = %+v, %v", m, err)
		}
		if v := m.Judge("cat x", nil); v.Decision != Forbid {
			t.Errorf("got %+v", v)
		}
	})
	loose := []struct {
		name string
		base Policy
		app  Policy
		want string
	}{
		{"allow beyond", base, Policy{Rules: []Rule{{ID: "curl", Command: Globs{"curl"}, Decision: Allow, Justification: "x"}}}, "rules[0]"},
		{"wider args", base, Policy{Rules: []Rule{{ID: "rm-any", Command: Globs{"rm"}, Decision: Allow, Justification: "x"}}}, "rules[0]"},
		{"glob beyond", base, Policy{Rules: []Rule{{ID: "any", Command: Globs{"*"}, Decision: Allow, Justification: "x"}}}, "rules[0]"},
		{"mode", base, Policy{Mode: Denylist}, "mode"},
		{"builtin off", base, Policy{UseBuiltinDenylist: &no}, "useBuiltinDenylist"},
		{"timeout", base, Policy{Limits: Limits{TimeoutSeconds: 120}}, "limits.timeoutSeconds"},
		{"memory", base, Policy{Limits: Limits{MemoryMiB: 1024}}, "limits.memoryMiB"},
		{"id collision", base, Policy{Rules: []Rule{{ID: "tools", Command: Globs{"cat"}, Decision: Forbid, Justification: "x"}}}, `"tools"`},
	}
	for _, tc := range loose {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Merge(tc.base, tc.app)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Merge error = %v; want one naming %s", err, tc.want)
			}
		})
	}
	if m, err := Merge(Policy{UseBuiltinDenylist: &no}, Policy{UseBuiltinDenylist: &yes}); err != nil || !m.builtin() {
		t.Errorf("turning the built-in denylist on: %+v, %v", m, err)
	}
}
