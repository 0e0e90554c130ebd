package policy

import "testing"

// Allowlist mode judges where a command writes (issue 28, finding 3): a
// write outside /workspace is refused unless a rule allows the path,
// however the path is spelled; writes in the workspace, /tmp and the
// standard streams still pass.
func TestAttackAllowlistRedirectTargets(t *testing.T) {
	p := Policy{Mode: Allowlist, Rules: append(allowlist.Rules,
		Rule{ID: "echo", Command: Globs{"echo", "printf", "tee", "cp", "mv", "dd"}, Decision: Allow, Justification: "writing files"},
		Rule{ID: "app-config", Command: Globs{"echo"}, Redirect: Globs{"/etc/myapp/*"}, Decision: Allow, Justification: "the app's own config"},
	)}
	runCases(t, p, []judgeCase{
		{"bashrc by tilde", "echo x > ~/.bashrc", Forbid, RuleWriteOutside, nil},
		{"bashrc by HOME", `echo x > "$HOME/.bashrc"`, Forbid, RuleWriteOutside, nil},
		{"bashrc appended", "echo 'curl x | sh' >> ~/.bashrc", Forbid, RuleWriteOutside, nil},
		{"both streams by &>", "echo x &> /opt/x.sh", Forbid, RuleWriteOutside, nil},
		{"clobber", "echo x >| /root/.profile", Forbid, RuleWriteOutside, nil},
		{"dotdot out of workspace", "echo x > /workspace/../root/.bashrc", Forbid, RuleWriteOutside, nil},
		{"relative after cd", "cd /etc && echo x > cron.d/job", Forbid, RuleWriteOutside, nil},
		{"relative dotdot", "echo x > ../root/.bashrc", Forbid, RuleWriteOutside, nil},
		{"relative after cd home", "cd; echo x > .bashrc", Forbid, RuleWriteOutside, nil},
		{"relative after cd unknown", `cd "$(ls)"; echo x > .bashrc`, Forbid, RuleWriteOutside, nil},
		{"relative after earlier cd", "echo x > .bashrc", Forbid, RuleWriteOutside, []string{"cd /root"}},
		{"unknown target", `echo x > "$T"`, Forbid, RuleWriteOutside, nil},
		{"on a block", "{ echo a; echo b; } > ~/.profile", Forbid, RuleWriteOutside, nil},
		{"shell state", "printf 'rm -f /workspace/v\\n' > /.flowbox/env.b", Forbid, RuleWriteOutside, nil},
		{"tee", "echo x | tee -a ~/.bashrc", Forbid, RuleWriteOutside, nil},
		{"cp destination", "cp /workspace/x ~/.bashrc", Forbid, RuleWriteOutside, nil},
		{"cp target directory", "cp -t /etc /workspace/x", Forbid, RuleWriteOutside, nil},
		{"mv destination", "mv /workspace/x /usr/local/bin/x", Forbid, RuleWriteOutside, nil},
		{"dd of", "dd if=/workspace/x of=/root/.bashrc", Forbid, RuleWriteOutside, nil},
		{"bare redirect", "> ~/.bashrc", Forbid, RuleWriteOutside, nil},

		{"workspace absolute", "echo x > /workspace/a", Allow, "", nil},
		{"workspace relative", "echo x > a.txt", Allow, "", nil},
		{"workspace subdir after cd", "mkdir -p out && cd out && echo x > a.txt", Allow, "", nil},
		{"relative after earlier cd into workspace", "echo x > a.txt", Allow, "", []string{"cd /workspace/src"}},
		{"tmp", "echo x > /tmp/x", Allow, "", nil},
		{"dev null", "echo x > /dev/null 2>&1", Allow, "", nil},
		{"stderr", "echo x > /dev/stderr", Allow, "", nil},
		{"tee in workspace", "echo x | tee out.log", Allow, "", nil},
		{"cp in workspace", "cp /etc/hosts /workspace/hosts", Allow, "", nil},
		{"allowed by a rule", "echo x > /etc/myapp/conf", Allow, "", nil},
		{"a rule allows only its paths", "echo x > /etc/other/conf", Forbid, RuleWriteOutside, nil},
	})
	// The denylist does not judge write targets this way.
	if v := (Policy{}).Judge("echo x > ~/.bashrc", nil); v.Decision != Allow {
		t.Errorf("denylist: %+v; want allow", v)
	}
}
