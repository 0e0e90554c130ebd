package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/sandbox"
)

// Stdio servers kept running. Where the sandbox gives commands standard
// input (sandbox.Capabilities.Stdin: bwrap, Docker with the agent), a
// stdio server is one long-lived command of the chat's sandbox, started
// on its first use: the engine holds its input and output and speaks MCP
// over them with the SDK, one session for every listing and call of that
// chat, so the server keeps its state between calls. It runs until the
// sandbox stops (the idle stop included: each use counts as the sandbox's
// use, the server's running does not), the sandbox is deleted, its
// registration changes, or the engine ends; the next use starts it again.
// Another engine replica serving the same chat starts a server of its own.
//
// Its start is a command of the sandbox chain (`exec` and the server's
// argv, quoted), judged, approved and audited as any; its calls are
// audited and redacted by the caller as an HTTP server's are, since they
// are no commands. Where standard input cannot be had, each operation is
// one command, as described in the package's documentation.

// sessionWait bounds waiting for a server's command to return once it
// was told to end.
const sessionWait = 10 * time.Second

// maxStderr is how much of a kept server's error output is kept, for the
// reason it ended.
const maxStderr = 4 << 10

// stdioSession is one running stdio server in one sandbox.
type stdioSession struct {
	cs      *mcp.ClientSession
	command string
	version string // the settings it was started with (fingerprint)

	stop context.CancelFunc // ends its command
	in   *io.PipeWriter     // its standard input
	out  *io.PipeReader     // its standard output, read by the SDK
	done chan struct{}      // closed when its command returned

	// Set before done is closed.
	res sandbox.ExecResult
	err error

	errMu  sync.Mutex
	stderr []byte // the last maxStderr bytes
}

func (s *stdioSession) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// output passes the server's standard output to the SDK, which reads it
// without pause; its error output is kept for the reason it ended.
func (s *stdioSession) output(out *io.PipeWriter) func(sandbox.Stream, []byte) {
	return func(stream sandbox.Stream, p []byte) {
		if stream == sandbox.Stdout {
			_, _ = out.Write(p) // fails once the session is closed
			return
		}
		s.errMu.Lock()
		s.stderr = append(s.stderr, p...)
		if len(s.stderr) > maxStderr {
			s.stderr = s.stderr[len(s.stderr)-maxStderr:]
		}
		s.errMu.Unlock()
	}
}

func (s *stdioSession) stderrText() string {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return strings.ToValidUTF8(string(s.stderr), "\uFFFD")
}

// close ends the server: its input ends and its command is cancelled; it
// waits for the command to return, up to sessionWait.
func (s *stdioSession) close() {
	s.stop()
	s.in.Close()
	s.out.Close()
	select {
	case <-s.done:
	case <-time.After(sessionWait):
	}
	if s.cs != nil {
		_ = s.cs.Close()
	}
}

// ended says why the server's command ended, for the model and the admin.
func (s *stdioSession) ended() error {
	if s.err != nil {
		return s.err
	}
	res := s.res
	res.Stderr = s.stderrText()
	switch {
	case res.ExitCode == 127:
		return fmt.Errorf("its command was not found in the sandbox (exit status 127): check the command registered for it, and that the program is installed in the sandbox%s", stderrTail(res.Stderr))
	case res.ExitCode == 126:
		return fmt.Errorf("its command cannot be run in the sandbox (exit status 126): is the program executable?%s", stderrTail(res.Stderr))
	}
	return fmt.Errorf("it ended (exit status %d)%s", res.ExitCode, stderrTail(res.Stderr))
}

// sessionSlot holds a sandbox's session with one server; one start at a
// time.
type sessionSlot struct {
	lock chan struct{}
	s    *stdioSession
	// noStdinUntil: until then, each operation is a command of its own:
	// this sandbox could not give the server standard input (a container
	// without the agent; its agent may also have been slow to start).
	noStdinUntil time.Time
}

// noStdinRetry is how long a sandbox that could not give a server
// standard input is not asked again.
const noStdinRetry = time.Minute

// errServerEnded is what the SDK reads once a server's command returned.
var errServerEnded = errors.New("the MCP server's command ended")

// errNoStdin says that the operation is to be one command of its own.
var errNoStdin = errors.New("no standard input for stdio servers in this sandbox")

// session returns the running session of srv in the target's sandbox,
// starting the server when it has none (or one started with other
// settings, or one that ended). It counts a use of the sandbox, which
// starts it when it was stopped. errNoStdin: the sandbox cannot keep the
// server running.
func (c *Client) session(ctx context.Context, srv Server, t Target) (*stdioSession, error) {
	if c.cfg.Sandbox == nil {
		return nil, &sandboxError{err: fmt.Errorf("stdio MCP servers run in the chat's sandbox, and this engine has none: %w", sandbox.ErrUnavailable)}
	}
	slot := c.slot(srv.ID + "/" + t.Scope.SandboxID())
	if slot == nil {
		return nil, fmt.Errorf("MCP server %q: the engine is stopping", srv.ID)
	}
	select {
	case slot.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for MCP server %q to start: %w", srv.ID, ctx.Err())
	}
	defer func() { <-slot.lock }()
	if time.Now().Before(slot.noStdinUntil) {
		return nil, errNoStdin
	}
	version := fingerprint(srv)
	if s := slot.s; s != nil && s.alive() && s.version == version {
		// The server's use is the sandbox's: it does not stop as idle
		// while the chat uses the server. A sandbox that had stopped is
		// started again, and the server with it.
		if _, err := c.cfg.Sandbox.Ensure(ctx, t.Scope); err != nil {
			return nil, &sandboxError{err: err, command: s.command}
		}
		if s.alive() {
			return s, nil
		}
	}
	if slot.s != nil {
		slot.s.close()
		slot.s = nil
	}
	s, err := c.start(ctx, srv, t)
	if errors.Is(err, sandbox.ErrNoStdin) {
		c.log.Info("MCP server: this sandbox cannot keep a stdio server running; each operation starts it", "server", srv.ID, "sandbox", t.Scope.SandboxID(), "err", err)
		slot.noStdinUntil = time.Now().Add(noStdinRetry)
		return nil, errNoStdin
	}
	if err != nil {
		return nil, err
	}
	slot.s = s
	return s, nil
}

// slot returns the session slot of key, creating it; nil once the client
// is closed.
func (c *Client) slot(key string) *sessionSlot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.sessions == nil {
		c.sessions = map[string]*sessionSlot{}
	}
	if s, ok := c.sessions[key]; ok {
		return s
	}
	// Forget the slots of servers that ended and are not starting.
	for k, s := range c.sessions {
		select {
		case s.lock <- struct{}{}:
			if s.s != nil && !s.s.alive() {
				delete(c.sessions, k)
			}
			<-s.lock
		default:
		}
	}
	s := &sessionSlot{lock: make(chan struct{}, 1)}
	c.sessions[key] = s
	return s
}

// start starts srv in the target's sandbox and opens an MCP session with
// it; the sandbox's errors (a refusal, an approval to ask, a cap, the
// sandbox unavailable, no standard input) come as a *sandboxError.
func (c *Client) start(ctx context.Context, srv Server, t Target) (*stdioSession, error) {
	cmd, err := serverCommand(srv.Command)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	// The server outlives the call that starts it.
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &stdioSession{command: cmd, version: fingerprint(srv), stop: stop, in: inW, out: outR, done: make(chan struct{})}
	actor := t.Actor
	go func() {
		res, err := c.cfg.Sandbox.Exec(run, t.Scope, sandbox.ExecRequest{Command: cmd, Stdin: inR, OnOutput: s.output(outW),
			Actor: actor, Approved: t.Approved})
		s.res, s.err = res, err
		inR.Close()
		outW.CloseWithError(errServerEnded)
		stop()
		close(s.done)
	}()

	client := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: "1"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	// The start of the sandbox, and of the server in it, is part of the
	// first operation's time.
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.IOTransport{Reader: outR, Writer: inW},
		&mcp.ClientSessionOptions{ProtocolVersion: handshakeVersion})
	if err == nil {
		s.cs = cs
		return s, nil
	}
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	// A server that closed its output or broke the protocol is ending, or
	// ends at the end of its input: its own end says more than the
	// handshake's.
	s.in.Close()
	selfEnded := false
	if !timedOut && ctx.Err() == nil {
		select {
		case <-s.done:
			selfEnded = true
		case <-time.After(2 * time.Second):
		}
	}
	s.close()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("start MCP server %q: %w", srv.ID, ctx.Err())
	case timedOut:
		return nil, fmt.Errorf("it did not answer initialize within %s%s", c.cfg.CallTimeout, stderrTail(s.stderrText()))
	case !selfEnded:
		return nil, fmt.Errorf("the MCP handshake failed: %w%s", err, stderrTail(s.stderrText()))
	case s.err != nil:
		// The sandbox did not run it: refused, to be approved, a cap.
		return nil, &sandboxError{err: s.err, command: cmd}
	case s.res.ExitCode == 126 || s.res.ExitCode == 127:
		return nil, s.ended()
	}
	return nil, fmt.Errorf("it ended (exit status %d) without answering initialize: it does not seem to speak MCP on its standard input and output%s",
		s.res.ExitCode, stderrTail(s.stderrText()))
}

// serverCommand is the command line that starts a server: exec (the
// shell gives way to it, and saves no state) and its argv.
func serverCommand(argv []string) (string, error) {
	words, err := quoteArgv(argv)
	if err != nil {
		return "", err
	}
	return "exec " + words, nil
}

// quoteArgv is a program's argv as shell words, each quoted by the shell
// parser's own quoting.
func quoteArgv(argv []string) (string, error) {
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("command element %d cannot be passed to a program: %w", i, err)
		}
		words[i] = q
	}
	return strings.Join(words, " "), nil
}

// sessionTools lists a kept server's tools, every page.
func (c *Client) sessionTools(ctx context.Context, s *stdioSession) ([]*mcp.Tool, error) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for tool, err := range s.cs.Tools(lctx, nil) {
		if err != nil {
			return nil, c.sessionErr(ctx, lctx, s, "list its tools", err)
		}
		tools = append(tools, tool)
		if len(tools) >= maxTools {
			break
		}
	}
	return tools, nil
}

// sessionCall calls a tool of a kept server.
func (c *Client) sessionCall(ctx context.Context, s *stdioSession, tool string, args json.RawMessage) (Result, error) {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	res, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return Result{}, c.sessionErr(ctx, cctx, s, "call "+tool, err)
	}
	return resultOf(res), nil
}

// sessionErr says why an exchange with a kept server failed: its answer
// was an error, it gave none in time, or it ended (why, then).
func (c *Client) sessionErr(parent, ctx context.Context, s *stdioSession, doing string, err error) error {
	var wire *jsonrpc.Error
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("%s: %w", doing, parent.Err())
	case errors.As(err, &wire):
		return &rpcError{method: methodOf(doing), msg: wireMessage(wire)}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer within %s", doing, c.cfg.CallTimeout)
	}
	select {
	case <-s.done:
		return fmt.Errorf("%s: the server's command ended meanwhile: %w", doing, s.ended())
	case <-time.After(100 * time.Millisecond):
		// Its end may take a moment to be seen.
		select {
		case <-s.done:
			return fmt.Errorf("%s: the server's command ended meanwhile: %w", doing, s.ended())
		default:
		}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func methodOf(doing string) string {
	if strings.HasPrefix(doing, "call ") {
		return "tools/call"
	}
	return "tools/list"
}

// Close ends every stdio server the client keeps running; none starts
// after it (their operations fail, saying the engine is stopping).
func (c *Client) Close() error {
	c.mu.Lock()
	slots := c.sessions
	c.sessions, c.closed = nil, true
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, slot := range slots {
		wg.Go(func() {
			slot.lock <- struct{}{}
			defer func() { <-slot.lock }()
			if slot.s != nil {
				slot.s.close()
				slot.s = nil
			}
		})
	}
	wg.Wait()
	return nil
}
