package mcptool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/sandbox"
)

// statelessSince is the first protocol version whose sessions start with
// server/discover (SEP-2575) instead of initialize; servers of those
// versions still accept initialize with an older one.
const statelessSince = "2026-07-28"

// handshakeVersion is the version a stdio session asks for: the newest
// the SDK knows that begins with initialize, which every stdio server
// understands.
var handshakeVersion = func() string {
	for _, v := range mcp.SupportedProtocolVersions() { // newest first
		if v < statelessSince {
			return v
		}
	}
	return "2025-11-25"
}()

// initID is the id of a session's initialize request. The request's own
// id ends with a hash of the request, so that the command line is the
// same for the same request (a person approves exactly one line) and
// that the answer is told from every other line of output.
const initID = "flowbox-init"

// pollInterval is how often the command checks whether the server has
// answered, to close its input then.
const pollInterval = 50 * time.Millisecond

// maxAnswer bounds the output of one stdio session kept for its answer.
const maxAnswer = 8 << 20

// liveOutput gathers a session's standard output as it comes, up to
// maxAnswer bytes.
type liveOutput struct {
	mu   sync.Mutex
	buf  strings.Builder
	over bool
}

func (o *liveOutput) write(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.buf.Len()+len(p) > maxAnswer {
		o.over = true
		return
	}
	o.buf.Write(p)
}

// text is the output and whether it is all there.
func (o *liveOutput) text() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String(), !o.over
}

// stdioPages bounds the pages of a stdio server's tool list: each is one
// command in the sandbox.
const stdioPages = 8

// stdioTools lists a stdio server's tools: through its kept session, or
// a page per command where it cannot be kept.
func (c *Client) stdioTools(ctx context.Context, srv Server, t Target) ([]*mcp.Tool, error) {
	for attempt := 0; ; attempt++ {
		s, err := c.session(ctx, srv, t)
		if errors.Is(err, errNoStdin) {
			break
		}
		if err != nil {
			return nil, err
		}
		tools, err := c.sessionTools(ctx, s)
		// A server that ended meanwhile (its sandbox stopped) is started
		// again once: a listing changes nothing.
		if err != nil && attempt == 0 && !s.alive() && ctx.Err() == nil {
			continue
		}
		return tools, err
	}
	var tools []*mcp.Tool
	cursor := ""
	for page := 0; page < stdioPages && len(tools) < maxTools; page++ {
		raw, _, err := c.exchange(ctx, srv, t, "tools/list", &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		var res mcp.ListToolsResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("its answer to tools/list is not a tool list: %w", err)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return tools, nil
}

// stdioCall calls a tool of a stdio server: through its kept session
// (the Result has no Command: the call ran none), or as a command of its
// own where the server cannot be kept. A call is never sent twice: one
// whose server ended meanwhile is a failure the model reads.
func (c *Client) stdioCall(ctx context.Context, srv Server, tool string, args json.RawMessage, t Target) (Result, error) {
	s, err := c.session(ctx, srv, t)
	switch {
	case err == nil:
		return c.sessionCall(ctx, s, tool, args)
	case !errors.Is(err, errNoStdin):
		return Result{}, err
	}
	raw, cmd, err := c.exchange(ctx, srv, t, "tools/call", &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return Result{Command: cmd}, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return Result{Command: cmd}, fmt.Errorf("its answer to tools/call is not a tool result: %w", err)
	}
	out := resultOf(&res)
	out.Command = cmd
	return out, nil
}

// exchange runs one session with a stdio server in the target's sandbox:
// initialize, notifications/initialized, then the request; it returns the
// request's result and the command line that ran.
func (c *Client) exchange(ctx context.Context, srv Server, t Target, method string, params any) (json.RawMessage, string, error) {
	if c.cfg.Sandbox == nil {
		return nil, "", &sandboxError{err: fmt.Errorf("stdio MCP servers run in the chat's sandbox, and this engine has none: %w", sandbox.ErrUnavailable)}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, "", fmt.Errorf("encode the %s request: %w", method, err)
	}
	id := requestID(srv.Command, method, p)
	lines, err := sessionLines(method, p, id)
	if err != nil {
		return nil, "", err
	}
	timeout := sandbox.ClampTimeout(c.cfg.CallTimeout)
	cmd, err := stdioCommand(srv.Command, lines, id, inputGrace(timeout))
	if err != nil {
		return nil, "", err
	}
	// The result keeps a bounded head and tail of the output, which would
	// cut a long answer; the live output has all of it.
	var live liveOutput
	onOutput := func(s sandbox.Stream, p []byte) {
		if s == sandbox.Stdout {
			live.write(p)
		}
		if t.OnOutput != nil {
			t.OnOutput(s, p)
		}
	}
	res, err := c.cfg.Sandbox.Exec(ctx, t.Scope, sandbox.ExecRequest{Command: cmd, Timeout: timeout, OnOutput: onOutput,
		Actor: t.Actor, Approved: t.Approved})
	if err != nil {
		return nil, cmd, &sandboxError{err: err, command: cmd}
	}
	stdout, complete := live.text()
	if stdout == "" {
		stdout, complete = res.Stdout, !res.Truncated
	}
	res.Truncated = !complete
	init, final := answers(stdout, id)
	switch {
	case final != nil && final.Error != nil:
		return nil, cmd, &rpcError{method: method, msg: wireMessage(final.Error)}
	case final != nil:
		return final.Result, cmd, nil
	case init != nil && init.Error != nil:
		return nil, cmd, fmt.Errorf("it refused to start a session: %s%s", wireMessage(init.Error), stderrTail(res.Stderr))
	}
	return nil, cmd, noAnswer(method, res, init != nil, timeout)
}

// requestID is the id of a session's request: the same for the same
// server command and request.
func requestID(argv []string, method string, params []byte) string {
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(params)
	return "flowbox-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// sessionLines are the messages of a session, one JSON-RPC message a
// line, in ASCII only.
func sessionLines(method string, params []byte, id string) ([]string, error) {
	init, err := json.Marshal(struct {
		ProtocolVersion string              `json:"protocolVersion"`
		Capabilities    struct{}            `json:"capabilities"` // none: the session cannot answer a server's requests
		ClientInfo      *mcp.Implementation `json:"clientInfo"`
	}{handshakeVersion, struct{}{}, &mcp.Implementation{Name: clientName, Version: "1"}})
	if err != nil {
		return nil, err
	}
	msgs := []*jsonrpc.Request{
		{ID: mustID(initID), Method: "initialize", Params: init},
		{Method: "notifications/initialized", Params: json.RawMessage(`{}`)},
		{ID: mustID(id), Method: method, Params: params},
	}
	lines := make([]string, len(msgs))
	for i, m := range msgs {
		b, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			return nil, fmt.Errorf("encode the %s message: %w", m.Method, err)
		}
		lines[i] = asciiJSON(b)
	}
	return lines, nil
}

func mustID(s string) jsonrpc.ID {
	id, err := jsonrpc.MakeID(s)
	if err != nil {
		panic(err) // a string is always a valid id
	}
	return id
}

// asciiJSON escapes every character of JSON text outside printable ASCII
// (they can only be in strings), so that each line is quoted by the
// shell as it is, between single quotes.
func asciiJSON(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r >= 0x20 && r < 0x7f:
			out.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		default: // invalid bytes were decoded as U+FFFD
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// inputGrace is how long the server's input stays open without an
// answer, in whole seconds (sleep in some images has no fractions):
// nearly the whole timeout, so that a server that gives up its requests
// at the end of its input (the Go SDK's does) has the time to answer,
// and a server that answers only at the end of its input still gets to
// answer before the timeout.
func inputGrace(timeout time.Duration) time.Duration {
	return max((timeout - max(timeout/10, time.Second)).Truncate(time.Second), time.Second)
}

// stdioCommand is the command line of one session: it writes the lines to
// the server's input and keeps that open until the line with the
// request's id is out (or for grace), then closes it so that the server
// ends; it prints the server's output up to that line and exits with the
// server's status. Every word comes quoted by the shell parser's own
// quoting; the rest is plain POSIX sh, for any sandbox image.
func stdioCommand(argv, lines []string, id string, grace time.Duration) (string, error) {
	words, err := quoteArgv(argv)
	if err != nil {
		return "", err
	}
	msgs := make([]string, len(lines))
	for i, l := range lines {
		q, err := syntax.Quote(l, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("message %d cannot be written to the server: %w", i, err)
		}
		msgs[i] = q
	}
	seconds := strconv.Itoa(max(int(grace/time.Second), 1))
	interval := strconv.FormatFloat(pollInterval.Seconds(), 'f', -1, 64)
	var b strings.Builder
	// The flag file says the answer is out; $$ keeps two sessions of one
	// sandbox apart.
	b.WriteString(`(f="${TMPDIR:-/tmp}/.` + id + `-$$"; rm -f "$f" "$f.rc"; `)
	// The server's input: the messages, then open until the flag or the
	// end of the grace, timed by a sleep in the background (its output
	// away from the pipe, which it would hold open); a sleep without
	// fractions falls back to polling every second.
	b.WriteString(`{ printf '%s\n' ` + strings.Join(msgs, " ") + `; sleep ` + seconds + ` >/dev/null 2>&1 & g=$!; ` +
		`while [ ! -e "$f" ] && kill -0 "$g" 2>/dev/null; do sleep ` + interval + ` 2>/dev/null || sleep 1; done; kill "$g" 2>/dev/null; } | `)
	b.WriteString(`{ ` + words + `; echo "$?" > "$f.rc"; } | `)
	// Its output, up to the answer: read reads a byte at a time, so no
	// line is held back waiting for the next.
	b.WriteString(`{ while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; case $l in *` + id + `*) break;; esac; done; : > "$f"; }; `)
	b.WriteString(`rc=; [ -r "$f.rc" ] && read -r rc < "$f.rc"; rm -f "$f" "$f.rc"; exit "${rc:-0}")`)
	return b.String(), nil
}

// answers finds the answers to initialize and to the request among the
// server's output lines; other lines (logs, notifications, requests of
// the server) are ignored.
func answers(stdout, id string) (init, final *jsonrpc.Response) {
	for _, line := range strings.Split(stdout, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			continue
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			continue
		}
		switch resp.ID.Raw() {
		case initID:
			init = resp
		case id:
			final = resp
		}
	}
	return init, final
}

// wireMessage is a JSON-RPC error's message.
func wireMessage(err error) string {
	if w, ok := err.(*jsonrpc.Error); ok {
		if len(w.Data) > 0 && len(w.Data) < 500 {
			return fmt.Sprintf("%s (code %d, %s)", w.Message, w.Code, w.Data)
		}
		return fmt.Sprintf("%s (code %d)", w.Message, w.Code)
	}
	return err.Error()
}

// noAnswer says why a session gave no answer.
func noAnswer(method string, res sandbox.ExecResult, initialized bool, timeout time.Duration) error {
	var why string
	switch {
	case res.TimedOut && !initialized:
		why = fmt.Sprintf("it did not answer initialize within %s", timeout)
	case res.TimedOut:
		why = fmt.Sprintf("it did not answer %s within %s", method, timeout)
	case res.ExitCode == 127:
		why = "its command was not found in the sandbox (exit status 127): check the command registered for it, and that the program is installed in the sandbox"
	case res.ExitCode == 126:
		why = "its command cannot be run in the sandbox (exit status 126): is the program executable?"
	case res.Truncated:
		why = fmt.Sprintf("its output for %s was longer than the %d MiB kept", method, maxAnswer>>20)
	case !initialized:
		why = fmt.Sprintf("it ended (exit status %d) without answering initialize: it does not seem to speak MCP on its standard input and output", res.ExitCode)
	default:
		why = fmt.Sprintf("it answered initialize but ended (exit status %d) without answering %s: a stdio server must answer the requests it read before it exits at the end of its input", res.ExitCode, method)
	}
	return fmt.Errorf("%s%s", why, stderrTail(res.Stderr))
}

// stderrTail is the end of a server's error output, for the model and
// the admin.
func stderrTail(stderr string) string {
	stderr = strings.TrimSpace(stderr)
	if stderr == "" {
		return ""
	}
	const keep = 600
	if len(stderr) > keep {
		cut := len(stderr) - keep
		for cut < len(stderr) && !utf8.RuneStart(stderr[cut]) {
			cut++
		}
		stderr = "…" + stderr[cut:]
	}
	return "; its error output ends with: " + stderr
}
