package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Call runs the tool the model named (a Tool.Name) with the model's
// arguments (a JSON object; empty means none). A server that is missing,
// disabled, down or broken, or arguments that are not an object, give a
// Result the model reads, with IsError set, and a nil error. Errors are
// the sandbox's for stdio servers, returned as they came so that callers
// handle them as they handle a command's: a policy refusal
// (*sandbox.RefusedError), an ask rule (*policy.AskError, Result.Command
// is the line to approve), sandbox.ErrUnavailable, a *sandbox.LimitError;
// and the context's when it ends. Result.Text then says what happened.
func (c *Client) Call(ctx context.Context, name string, args json.RawMessage, t Target) (Result, error) {
	id, ok := serverOf(name)
	if !ok {
		return Result{IsError: true, Text: fmt.Sprintf("there is no MCP tool named %q", name)}, nil
	}
	srv, err := c.server(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return Result{IsError: true, Text: fmt.Sprintf("MCP server %q no longer exists, so tool %q is gone; the run goes on without it", id, name)}, nil
	case err != nil:
		return Result{IsError: true, Text: fmt.Sprintf("MCP server %q cannot be used: %v; the run goes on without it", id, err)}, nil
	}
	arguments, problem := objectArgs(args)
	if problem != "" {
		return Result{IsError: true, Text: problem}, nil
	}
	tool, res, err := c.find(ctx, srv, name, t)
	if tool == nil {
		return res, err
	}
	switch srv.Transport {
	case TransportHTTP:
		res, err = c.httpCall(ctx, srv, tool.Original, arguments)
	case TransportStdio:
		res, err = c.stdioCall(ctx, srv, tool.Original, arguments, t)
	}
	if err != nil {
		return c.failure(ctx, srv, res, err)
	}
	res.Text = clip(res.Text, c.cfg.MaxResultBytes)
	return res, nil
}

// find looks the model's name up in the server's tools, refreshing them
// once when it is not there (the server may have changed). A nil tool
// comes with the result to give instead.
func (c *Client) find(ctx context.Context, srv Server, name string, t Target) (*Tool, Result, error) {
	var tools []Tool
	for _, refresh := range []bool{false, true} {
		var err error
		if tools, err = c.list(ctx, srv, t, refresh); err != nil {
			res, err := c.failure(ctx, srv, Result{}, err)
			return nil, res, err
		}
		for i := range tools {
			if tools[i].Name == name {
				return &tools[i], Result{}, nil
			}
		}
	}
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	return nil, Result{IsError: true, Text: fmt.Sprintf("MCP server %q has no tool %q now; its tools are: %s", srv.ID, name, strings.Join(names, ", "))}, nil
}

// failure turns an error into the result the model reads, and keeps the
// errors the caller must handle (the sandbox's, the context's).
func (c *Client) failure(ctx context.Context, srv Server, res Result, err error) (Result, error) {
	res.IsError = true
	var se *sandboxError
	switch {
	case errors.As(err, &se):
		// A listing an ask rule stopped is approved as a call would be.
		if res.Command == "" {
			res.Command = se.command
		}
		res.Text = fmt.Sprintf("MCP server %q could not run in the sandbox: %v", srv.ID, se.err)
		return res, fmt.Errorf("MCP server %q: %w", srv.ID, se.err)
	case ctx.Err() != nil:
		res.Text = fmt.Sprintf("the call to MCP server %q was stopped: %v", srv.ID, ctx.Err())
		return res, fmt.Errorf("MCP server %q: %w", srv.ID, ctx.Err())
	}
	var re *rpcError
	if errors.As(err, &re) && re.method == "tools/call" {
		res.Text = fmt.Sprintf("MCP server %q refused the call: %s", srv.ID, re.msg)
		return res, nil
	}
	var serr *ServerError
	if errors.As(err, &serr) {
		err = serr.Err
	}
	c.log.Warn("MCP server unreachable", "server", srv.ID, "err", scrub(srv, err.Error()))
	res.Text = fmt.Sprintf("MCP server %q is unreachable: %s; the run goes on without it", srv.ID, scrub(srv, err.Error()))
	return res, nil
}

// sandboxError is an error of the sandbox that ran a stdio server: the
// caller handles it as it handles a command's. command is the line that
// met it, for an approval.
type sandboxError struct {
	err     error
	command string
}

func (e *sandboxError) Error() string { return e.err.Error() }

func (e *sandboxError) Unwrap() error { return e.err }

// rpcError is a server's JSON-RPC error answer to a request.
type rpcError struct{ method, msg string }

func (e *rpcError) Error() string {
	return fmt.Sprintf("it answered %s with an error: %s", e.method, e.msg)
}

// objectArgs checks the model's arguments: a JSON object, or nothing.
func objectArgs(args json.RawMessage) (json.RawMessage, string) {
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
		return json.RawMessage(`{}`), ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &obj); err != nil || obj == nil {
		return nil, fmt.Sprintf("the arguments must be a JSON object matching the tool's schema, not %s", clipArgs(trimmed))
	}
	return json.RawMessage(trimmed), ""
}

func clipArgs(s string) string {
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// clip cuts the middle of a text longer than max bytes, marking the cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max*3/4, max/4
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes cut ...]\n", start-head) + s[start:]
}
