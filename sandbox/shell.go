package sandbox

// The persistent shell (S11, B3). Every command runs in a fresh shell that
// first restores the state the previous command left in the sandbox's
// state directory (exported variables and the current directory), then
// evaluates the command, then saves the state again on exit, whatever the
// exit status. The state lives in the sandbox, not in the engine, so any
// engine replica can serve the next command and the state survives
// stop/start. A command killed at its timeout saves nothing.
//
// The state is data, never code (T3). The sandbox can write its state
// directory, so nothing found there is sourced: whoever starts the shell
// (the in-sandbox agent, or the engine for a command without one) reads
// the files with ReadShellState, which parses the saved `export -p` as
// data, keeps only well-formed names, drops the variables that make a
// shell or the dynamic loader run code on their own (BASH_ENV, ENV,
// SHELLOPTS, LD_PRELOAD, ...), and renders what is left as single-quoted
// assignments: the shell's prelude ($4). A planted state file can set
// variables, as the command `export` would, and nothing more.
//
// The command travels as a positional argument, never spliced into the
// script, so no quoting of model-written text is needed. (The agent's
// spare shells, which are started before their command is known, receive
// the arguments as one `set --` line in single quotes, inside which
// nothing but the quote itself is special.)
//
// Saving uses only shell builtins: a rename through mv would make it
// atomic but costs a process per file (about 1.4 ms each, a third of a
// bare bwrap start). Nor does it truncate: on ext4, closing a file that
// was truncated and written again starts its writeback at once (the
// auto_da_alloc safeguard), which cost 0.8 ms of every command. So the
// files are written over in place: cwd's first line is all that is read
// of it; the variables (export -p) go to the one of env.a and env.b not
// in use, followed by a `return` line that ends their reading before
// whatever an earlier, longer version left after it, and then env.now, a
// line of fixed length written at once, names it. A command killed while
// saving leaves the previous variables in use. The price: two commands
// running at once in one sandbox may read a state file in the
// microseconds another rewrites it, and then miss some variables for
// that one command.
//
// Each command first makes itself, and so every process it starts, the
// kernel's first choice when memory runs out (oom_score_adj 1000: any
// process may raise its own): at the sandbox's memory limit the OOM
// killer takes the command, never the agent or the init beside it,
// whatever their sizes at that moment.
//
// A long-lived command (one with standard input, ExecRequest.Stdin)
// restores the state and saves none: at its end it would write back the
// state of its start over what the commands run meanwhile left.
//
// ShellScript is the script: $1 is the state directory, $2 the directory a
// new sandbox starts in, $3 the command, $4 the prelude (ShellState.Prelude).
const ShellScript = shellRestore + shellSave + `eval "$__fb_c"
`

const longLivedScript = shellRestore + `eval "$__fb_c"
`

// shellRestore evaluates the prelude, which the engine or the agent
// rendered from validated data: it sets exported variables, __fb_l (the
// last directory) and __fb_e (the variables' file in use).
const shellRestore = `{ echo 1000 > /proc/self/oom_score_adj; } 2>/dev/null
__fb_s=$1 __fb_w=$2 __fb_c=$3 __fb_l=$2 __fb_e=env
eval "$4"
shift 4
cd "$__fb_l" 2>/dev/null || cd "$__fb_w" 2>/dev/null || cd /
`

const shellSave = `__fb_save() {
	__fb_rc=$?
	trap - EXIT
	{
		[ "$PWD" = "$__fb_l" ] || printf '%s\n' "$PWD" 1<> "$__fb_s/cwd"
		case $__fb_e in env.a) __fb_e=env.b ;; *) __fb_e=env.a ;; esac
		{ export -p; echo return; } 1<> "$__fb_s/$__fb_e" &&
			echo "$__fb_e" 1<> "$__fb_s/env.now"
	} >/dev/null 2>&1
	exit $__fb_rc
}
trap __fb_save EXIT
`

// ShellArgv returns the argv that runs command through the persistent
// shell: shell is the interpreter (/bin/bash, /bin/sh), stateDir where the
// state is kept and workDir the directory a new sandbox starts in, both as
// seen by the command.
func ShellArgv(shell, stateDir, workDir, command string, st ShellState) []string {
	return []string{shell, "-c", ShellScript, "flowbox-shell", stateDir, workDir, command, st.Prelude()}
}

// LongLivedArgv is ShellArgv for a long-lived command: the state is
// restored, none is saved.
func LongLivedArgv(shell, stateDir, workDir, command string, st ShellState) []string {
	return []string{shell, "-c", longLivedScript, "flowbox-shell", stateDir, workDir, command, st.Prelude()}
}

// ArgvFor is the argv of req's command: LongLivedArgv for a long-lived
// one, else ShellArgv.
func ArgvFor(req ExecRequest, shell, stateDir, workDir string, st ShellState) []string {
	if req.LongLived() {
		return LongLivedArgv(shell, stateDir, workDir, req.Command, st)
	}
	return ShellArgv(shell, stateDir, workDir, req.Command, st)
}

// InteractiveRC is the start-up file of a terminal's interactive shell
// (L1): it restores the state as ShellScript does, and saves it after
// every command line (bash's PROMPT_COMMAND) and when the shell ends, so
// that the agent's next command starts where the person left the
// terminal. A shell without PROMPT_COMMAND (busybox's sh) saves at its
// end alone. Like the prelude, it is rendered from validated data.
func InteractiveRC(stateDir, workDir string, st ShellState) string {
	return "set -- " + ShellQuote(stateDir) + " " + ShellQuote(workDir) + " '' " + ShellQuote(st.Prelude()) + "\n" +
		shellRestore + `__fb_keep() {
	__fb_rc=$?
	{
		if [ "$PWD" != "$__fb_l" ]; then printf '%s\n' "$PWD" 1<> "$__fb_s/cwd"; __fb_l=$PWD; fi
		case $__fb_e in env.a) __fb_e=env.b ;; *) __fb_e=env.a ;; esac
		{ export -p; echo return; } 1<> "$__fb_s/$__fb_e" &&
			echo "$__fb_e" 1<> "$__fb_s/env.now"
	} >/dev/null 2>&1
	return $__fb_rc
}
trap __fb_keep EXIT
trap 'exit 129' HUP
if [ -n "$BASH_VERSION" ]; then PROMPT_COMMAND=__fb_keep PS1='\w \$ '; else PS1='$ '; fi
`
}
