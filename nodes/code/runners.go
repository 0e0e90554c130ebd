package code

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// How a program reaches the sandbox. One command carries everything: the
// builder's code in the environment variable FLOWBOX_CODE (single-quoted,
// so nothing in it is shell syntax), a small runner given to the
// interpreter with -c / -e, and the inputs as JSON on standard input from
// a quoted here-document. Nothing is written to the sandbox's disk, so
// nothing is left behind, the user's workspace included, and the policy
// and the audit see one command that names the interpreter. The price is
// size: the whole command travels as one argument of the sandbox's shell,
// which Linux limits to 128 KiB (MaxCommand).
//
// The runner reads the code's own way of answering (the exec tools'
// contract): a program that defines main gets the custom inputs (Python:
// as keyword arguments, or the whole dict when its one parameter names
// none of them; JavaScript: as one object) and its return value, a JSON
// object, is the result; what it prints goes to the node's log. A
// program without main reads the inputs from standard input itself and
// prints its result as a JSON object. A failure prints its summary first
// ("TypeError: ... (code.py line 3)"), then the frames in the code, then
// what was printed before it, and exits 1.

// MaxCommand bounds the command that carries a program and its inputs:
// below Linux's 128 KiB limit on one argument (MAX_ARG_STRLEN), with
// room for the runner.
const MaxCommand = 120 << 10

// inputEnd ends the here-document of the inputs. Compact JSON is one line
// that starts with '{', so it never equals this line.
const inputEnd = "FLOWBOX_INPUT"

// language is one interpreter the node runs code with.
type language struct {
	// Program is the interpreter's name in the sandbox.
	Program string
	// Flag gives the interpreter the runner's text.
	Flag   string
	Runner string
	// Name is the language's name, for messages.
	Name string
}

var languages = map[string]language{
	"js": {Program: "node", Flag: "-e", Runner: jsRunner, Name: "JavaScript"},
	"py": {Program: "python3", Flag: "-c", Runner: pyRunner, Name: "Python"},
}

// quote makes s one word a POSIX shell reads literally: inside single
// quotes everything but the quote itself is literal, newlines included.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// command is the shell command that runs src with inputs on its standard
// input.
func command(lang language, src string, inputs map[string]any) (string, error) {
	if strings.ContainsRune(src, 0) {
		return "", errors.New("the code contains a NUL character, which no program text may hold; remove it")
	}
	in, err := json.Marshal(inputs)
	if err != nil {
		return "", fmt.Errorf("the custom inputs cannot be written as JSON: %w", err)
	}
	cmd := "FLOWBOX_CODE=" + quote(src) + " " + lang.Program + " " + lang.Flag + " " + quote(lang.Runner) +
		" <<'" + inputEnd + "'\n" + string(in) + "\n" + inputEnd + "\n"
	if len(cmd) > MaxCommand {
		return "", fmt.Errorf("the code and its inputs take %d KiB written as one sandbox command, and a code node's command may take at most %d KiB: "+
			"keep large data out of the inputs (put it in a file of the chat's workspace and read it from the code) or shorten the code",
			(len(cmd)+1023)>>10, MaxCommand>>10)
	}
	return cmd, nil
}

// pyRunner runs FLOWBOX_CODE as code.py.
const pyRunner = `import inspect, io, json, os, sys, traceback


def _flowbox_call(main, inputs):
    try:
        params = list(inspect.signature(main).parameters.values())
    except (TypeError, ValueError):
        return main(**inputs)
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return main(**inputs)
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if len(params) == 1 and names and names[0] not in inputs:
        return main(inputs)
    return main(**{k: v for k, v in inputs.items() if k in names})


def _flowbox_report(e, src, printed):
    # The frames in the code, with its own lines: the name code.py is not
    # a file, and linecache would find the standard library's code.py.
    lines = src.splitlines()
    frames = [f for f in traceback.extract_tb(e.__traceback__, limit=None) if f.filename == "<flowbox-code>"]
    line = None
    if isinstance(e, SyntaxError) and e.filename == "<flowbox-code>":
        line = e.lineno
    elif frames:
        line = frames[-1].lineno
    summary = traceback.format_exception_only(type(e), e)[-1].strip()
    text = summary + (" (code.py line %d)" % line if line else "") + "\n"
    for f in frames:
        text += '  File "code.py", line %d, in %s\n' % (f.lineno, f.name)
        if f.lineno and 0 < f.lineno <= len(lines):
            text += "    " + lines[f.lineno - 1].strip() + "\n"
    if printed:
        text += "--- printed before the error ---\n" + printed
    sys.stderr.write(text)


def _flowbox_run():
    src = os.environ.pop("FLOWBOX_CODE", "")
    out = sys.stdout
    sys.stdout = io.StringIO()
    scope = {"__name__": "__main__", "__file__": "code.py", "__builtins__": __builtins__}
    try:
        exec(compile(src, "<flowbox-code>", "exec"), scope)
        main = scope.get("main")
        if not callable(main):
            printed, sys.stdout = sys.stdout.getvalue(), out
            out.write(printed)
            return 0
        raw = sys.stdin.read()
        inputs = json.loads(raw) if raw.strip() else {}
        result = _flowbox_call(main, inputs)
        if inspect.iscoroutine(result):
            import asyncio
            result = asyncio.run(result)
        if not isinstance(result, dict):
            raise TypeError("main must return a dict (its keys are the node's outputs), not %s" % type(result).__name__)
        data = json.dumps(result, ensure_ascii=False, allow_nan=False, default=str)
    except SystemExit:
        printed, sys.stdout = sys.stdout.getvalue(), out
        out.write(printed)
        raise
    except BaseException as e:
        printed, sys.stdout = sys.stdout.getvalue(), out
        _flowbox_report(e, src, printed)
        return 1
    printed, sys.stdout = sys.stdout.getvalue(), out
    sys.stderr.write(printed)
    out.write(data)
    return 0


sys.exit(_flowbox_run())
`

// jsRunner runs FLOWBOX_CODE as code.js, a CommonJS module body.
const jsRunner = `"use strict";
const vm = require("vm");
const src = process.env.FLOWBOX_CODE || "";
delete process.env.FLOWBOX_CODE;
const write = process.stdout.write.bind(process.stdout);
let printed = "";
process.stdout.write = (chunk, encoding, cb) => {
  printed += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
  if (typeof encoding === "function") encoding();
  else if (typeof cb === "function") cb();
  return true;
};
const release = () => {
  process.stdout.write = write;
  const p = printed;
  printed = "";
  return p;
};
const fail = (e) => {
  const log = release();
  const stack = String((e && e.stack) || "");
  const at = /code\.js:(\d+)/.exec(stack);
  const name = (e && e.name) || "Error";
  const message = e && e.message !== undefined ? e.message : String(e);
  let text = name + ": " + message + (at ? " (code.js line " + at[1] + ")" : "") + "\n";
  const frames = stack.split("\n").filter((l) => /^\s+at .*code\.js:/.test(l));
  if (frames.length) text += frames.join("\n") + "\n";
  if (log) text += "--- printed before the error ---\n" + log;
  process.stderr.write(text, () => process.exit(1));
};
(async () => {
  const body = src + "\n;return typeof main === \"function\" ? main : undefined;";
  const fn = vm.compileFunction(body, ["require", "module", "exports", "__filename", "__dirname"], { filename: "code.js" });
  const mod = { exports: {} };
  const main = fn(require, mod, mod.exports, "code.js", process.cwd());
  if (typeof main !== "function") {
    write(release());
    return;
  }
  const raw = require("fs").readFileSync(0, "utf8");
  const inputs = raw.trim() ? JSON.parse(raw) : {};
  const result = await main(inputs);
  if (result === null || typeof result !== "object" || Array.isArray(result)) {
    const kind = result === null ? "null" : Array.isArray(result) ? "an array" : typeof result;
    throw new TypeError("main must return an object (its keys are the node's outputs), not " + kind);
  }
  const data = JSON.stringify(result);
  const log = release();
  if (log) process.stderr.write(log);
  write(data, () => process.exit(0));
})().catch(fail);
`
