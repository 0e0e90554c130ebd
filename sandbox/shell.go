package sandbox

// The persistent shell (S11, B3). Every command runs in a fresh shell that
// first restores the state the previous command left in the sandbox's
// state directory (exported variables and the current directory), then
// evaluates the command, then saves the state again on exit, whatever the
// exit status. The state lives in the sandbox, not in the engine, so any
// engine replica can serve the next command and the state survives
// stop/start. A command killed at its timeout saves nothing.
//
// The command travels as a positional argument, never spliced into the
// script, so no quoting of model-written text is ever needed.
//
// Saving uses only shell builtins: a rename through mv would make it
// atomic but costs a process per file (about 1.4 ms each, a third of a
// bare bwrap start). The price: two commands running at once in one
// sandbox may read a state file in the microseconds another rewrites it,
// and then miss some variables for that one command.
const shellScript = `__fb_s=$1 __fb_w=$2 __fb_c=$3
shift 3
if [ -r "$__fb_s/env" ]; then . "$__fb_s/env" >/dev/null 2>&1; fi
__fb_l=$__fb_w
if [ -r "$__fb_s/cwd" ]; then IFS= read -r __fb_l < "$__fb_s/cwd"; fi
cd "$__fb_l" 2>/dev/null || cd "$__fb_w" 2>/dev/null || cd /
__fb_save() {
	__fb_rc=$?
	trap - EXIT
	{
		[ "$PWD" = "$__fb_l" ] || printf '%s\n' "$PWD" > "$__fb_s/cwd"
		export -p > "$__fb_s/env"
	} >/dev/null 2>&1
	exit $__fb_rc
}
trap __fb_save EXIT
eval "$__fb_c"
`

// ShellArgv returns the argv that runs command through the persistent
// shell: shell is the interpreter (/bin/bash, /bin/sh), stateDir where the
// state is kept and workDir the directory a new sandbox starts in, both as
// seen by the command.
func ShellArgv(shell, stateDir, workDir, command string) []string {
	return []string{shell, "-c", shellScript, "flowbox-shell", stateDir, workDir, command}
}
