package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Result is what one tool call gave.
type Result struct {
	Tool string `json:"tool"`
	// IsError says the call failed on its own terms (a command's exit
	// code ≠ 0, a timeout); it is not an API error and is never retried.
	IsError bool `json:"isError"`
	// Text is what a model would read.
	Text       string `json:"text"`
	DurationMs int64  `json:"durationMs"`
	// Output is the tool's structured result; Decode reads it.
	Output json.RawMessage `json:"output"`
}

// Duration is how long the call ran.
func (r *Result) Duration() time.Duration { return time.Duration(r.DurationMs) * time.Millisecond }

// Decode reads the structured output into v, such as a *ShellResult for
// shell:exec and skill:run.
func (r *Result) Decode(v any) error {
	if len(r.Output) == 0 {
		return fmt.Errorf("decode the output of %s: the result has none", r.Tool)
	}
	if err := json.Unmarshal(r.Output, v); err != nil {
		return fmt.Errorf("decode the output of %s: %w", r.Tool, err)
	}
	return nil
}

// ShellResult is the output of shell:exec and skill:run.
type ShellResult struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exitCode"`
	TimedOut   bool   `json:"timedOut"`
	Truncated  bool   `json:"truncated"`
	DurationMs int64  `json:"durationMs"`
}

type executeBody struct {
	Tool    string         `json:"tool"`
	Params  any            `json:"params,omitempty"`
	Stream  bool           `json:"stream,omitempty"`
	Session *sessionFields `json:"session,omitempty"`
}

// Execute runs one tool in a session with params (a struct or map
// encoded as JSON, or nil) and returns its result; a failed command is a
// Result with IsError, not an error.
func (c *Client) Execute(ctx context.Context, sessionID, tool string, params any) (*Result, error) {
	var res Result
	err := c.sendJSON(ctx, http.MethodPost, sessionPath(sessionID, "/execute"), executeBody{Tool: tool, Params: params}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecuteOnce runs one tool in a temporary session made with opts for
// the call and deleted after it.
func (c *Client) ExecuteOnce(ctx context.Context, tool string, params any, opts SessionOptions) (*Result, error) {
	if err := noSnapshot("ExecuteOnce", opts); err != nil {
		return nil, err
	}
	s := opts.wire()
	var res Result
	if err := c.sendJSON(ctx, http.MethodPost, "/execute", executeBody{Tool: tool, Params: params, Session: &s}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecuteStream runs one tool as Execute does, calling onOutput with
// each piece of output as the command writes it (stream is "stdout" or
// "stderr"), before it returns the result. onOutput runs on the calling
// goroutine; the call waits for it.
func (c *Client) ExecuteStream(ctx context.Context, sessionID, tool string, params any, onOutput func(stream, text string)) (*Result, error) {
	r, err := jsonRequest(http.MethodPost, sessionPath(sessionID, "/execute"), executeBody{Tool: tool, Params: params, Stream: true})
	if err != nil {
		return nil, err
	}
	r.header.Set("Accept", "text/event-stream")
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		// An engine that answers in one piece has no output to stream.
		var res Result
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return nil, fmt.Errorf("execute %s: decode the answer: %w", tool, err)
		}
		return &res, nil
	}
	res, err := readStream(resp.Body, onOutput)
	if err != nil {
		return nil, fmt.Errorf("execute %s: %w", tool, err)
	}
	return res, nil
}

// readStream reads the execute stream's events up to its result or
// error.
func readStream(body io.Reader, onOutput func(stream, text string)) (*Result, error) {
	br := bufio.NewReader(body)
	var event string
	var data strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read the stream: the stream ended before the result: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data.Len() > 0 || event != "" {
				res, done, err := dispatch(event, data.String(), onOutput)
				if done || err != nil {
					return res, err
				}
			}
			event = ""
			data.Reset()
		case strings.HasPrefix(line, ":"): // a comment, such as a keep-alive
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
		}
	}
}

// dispatch handles one event; done says it ended the stream.
func dispatch(event, data string, onOutput func(stream, text string)) (_ *Result, done bool, _ error) {
	switch event {
	case "output":
		var o struct {
			Stream string `json:"stream"`
			Text   string `json:"text"`
		}
		if err := json.Unmarshal([]byte(data), &o); err != nil {
			return nil, true, fmt.Errorf("decode an output event: %w", err)
		}
		if onOutput != nil {
			onOutput(o.Stream, o.Text)
		}
		return nil, false, nil
	case "result":
		var res Result
		if err := json.Unmarshal([]byte(data), &res); err != nil {
			return nil, true, fmt.Errorf("decode the result event: %w", err)
		}
		return &res, true, nil
	case "error":
		var w wireError
		if err := json.Unmarshal([]byte(data), &w); err != nil {
			return nil, true, fmt.Errorf("decode the error event: %w", err)
		}
		return nil, true, fromWire(w)
	}
	return nil, false, nil // an event of a later version of the API
}

// Exec runs a shell command in a session (the shell:exec tool) and
// returns its output. A command that exits with a code other than 0 or
// times out is not an error: read ExitCode and TimedOut.
func (c *Client) Exec(ctx context.Context, sessionID, command string) (*ShellResult, error) {
	res, err := c.Execute(ctx, sessionID, "shell:exec", map[string]any{"command": command})
	if err != nil {
		return nil, err
	}
	var out ShellResult
	if err := res.Decode(&out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"` // "file", "dir", ...
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
	// ReadOnly: in a read-only mount (the skills).
	ReadOnly bool `json:"readOnly,omitempty"`
}

// ListFiles lists a directory of the session's sandbox (file:list).
func (c *Client) ListFiles(ctx context.Context, sessionID, path string) ([]FileEntry, error) {
	var out struct {
		Entries []FileEntry `json:"entries"`
	}
	if err := c.tool(ctx, sessionID, "file:list", map[string]string{"path": path}, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// tool runs a tool whose failure is an error, decoding its output.
func (c *Client) tool(ctx context.Context, sessionID, tool string, params, out any) error {
	res, err := c.Execute(ctx, sessionID, tool, params)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", tool, res.Text)
	}
	return res.Decode(out)
}
