// Package policy judges a shell command before a sandbox runs it (P5,
// P6, P10): a Policy is data (schemas/policy.schema.json) of rules that
// allow, ask about or forbid commands by name and arguments, a mode
// (denylist or allowlist), a built-in denylist and limits. Merge lets an
// app's policy tighten the operator's; Middleware puts the judgment in
// the sandbox chain.
//
// Judging parses the command line (mvdan.cc/sh) and judges every simple
// command it can run: in pipelines, lists, subshells, groups, function
// bodies, if/while/for/case bodies, command and process substitutions,
// the script of bash -c (and sh, dash, zsh, ...), here-documents fed to
// a shell, eval, trap, and the command behind env, command, builtin,
// exec, nice, nohup, timeout, sudo, doas, xargs, find -exec and busybox.
// Words are resolved as the shell would: quotes and escapes removed,
// ${IFS} splitting, brace expansion, variables, aliases and functions
// defined earlier on the line or in the chat's History, echo output
// substituted, paths cleaned. What cannot be known before the command
// runs (an unknown variable, a script file, eval of one) is refused in
// allowlist mode; in denylist mode its arguments are still judged. In
// allowlist mode, where a command writes is judged too (writes.go): a
// redirection, tee, cp/mv or dd of= outside /workspace and /tmp is
// refused unless an allow rule names the path.
//
// It must never be taken for the security boundary. A denylist lists
// known ways to do damage and cannot list them all: the same effect has
// endless spellings (a program the model writes in Python, a file that
// links to /, `find / -delete` with a glob, a binary downloaded and run,
// an interpreter's -e), and the judge only sees the text of the command,
// not the files it reads or the values the shell computes at run time.
// An allowlist is much stronger but only as strong as what it allows:
// allowing python, node, make, git or any interpreter allows everything.
// Both are filters that stop accidents and make intent visible in the
// audit. The sandbox is what contains a command that gets through: its
// own filesystem, no network unless granted, and limits on memory, CPU,
// processes and time.
//
// The package is pure: it runs nothing and stores nothing.
package policy
