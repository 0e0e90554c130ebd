package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/files"
)

// ToolList serves GET /api/sandbox/v1/tools.
func (h *API) ToolList(c *gin.Context) {
	owner, _ := caller(c)
	// No session: tools that are listed inside a sandbox (stdio MCP
	// servers) are left out rather than a sandbox made to list them.
	scope := sandbox.Scope{AppID: sessions.NoApp, UserID: owner}
	tools, err := h.Tools.List(c.Request.Context(), scope)
	if err != nil {
		// A backend that failed (an MCP server down) leaves its tools
		// out; the others are listed.
		h.log().Warn("sandbox service API: some tools are not listed", "err", err)
	}
	// The caller's tools: its app's (an app's key) or the operator's
	// choice for callers without one.
	appID := ""
	if p, _ := api.PrincipalOf(c); p.Bound() {
		appID = p.AppID
	}
	ts, err := h.toolScope(c.Request.Context(), appID)
	if err != nil {
		api.ServiceError(c, http.StatusServiceUnavailable, api.ErrorKind(http.StatusServiceUnavailable), "could not read your app to list its tools; retry later")
		return
	}
	tools = ts.offered(tools)
	type toolView struct {
		Name            string          `json:"name"`
		Description     string          `json:"description"`
		InputSchema     json.RawMessage `json:"inputSchema"`
		ReadOnly        bool            `json:"readOnly"`
		Destructive     bool            `json:"destructive"`
		ConcurrencySafe bool            `json:"concurrencySafe"`
	}
	out := make([]toolView, len(tools))
	for i, t := range tools {
		out[i] = toolView{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, ReadOnly: t.ReadOnly,
			Destructive: t.Destructive, ConcurrencySafe: t.ConcurrencySafe}
	}
	c.JSON(http.StatusOK, gin.H{"tools": out})
}

// executeRequest is the body of the execute routes.
type executeRequest struct {
	Tool    string          `json:"tool"`
	Params  json.RawMessage `json:"params"`
	Stream  bool            `json:"stream"`
	Session SessionOptions  `json:"session"`
}

// executeResult is a tool's result as the API answers it.
type executeResult struct {
	Tool       string `json:"tool"`
	IsError    bool   `json:"isError"`
	Text       string `json:"text"`
	Output     any    `json:"output"`
	DurationMs int64  `json:"durationMs"`
}

// Execute serves POST /api/sandbox/v1/sessions/{id}/execute.
func (h *API) Execute(c *gin.Context) {
	var req executeRequest
	if !bindJSON(c, &req) {
		return
	}
	s, ok := h.own(c)
	if !ok {
		return
	}
	h.execute(c, s, req)
}

// ExecuteOnce serves POST /api/sandbox/v1/execute: one call in a
// temporary session, deleted after it whatever the call gave.
func (h *API) ExecuteOnce(c *gin.Context) {
	var req executeRequest
	if !bindJSON(c, &req) {
		return
	}
	s, status, problem := h.session(c, req.Session)
	if problem != "" {
		api.ServiceError(c, status, api.ErrorKind(status), "session."+problem)
		return
	}
	s.Temporary = true
	if err := h.Sessions.Create(c.Request.Context(), s); err != nil {
		h.sandboxFailure(c, err)
		return
	}
	defer func() {
		if err := h.destroy(c.Request.Context(), s); err != nil {
			h.log().Error("a temporary session was not deleted; reconciliation will find its sandbox", "session", s.ID, "err", err)
		}
	}()
	h.execute(c, s, req)
}

// execute runs one tool call in a session and answers its result, as
// one JSON object or as Server-Sent Events with the live output.
func (h *API) execute(c *gin.Context, s sessions.Session, req executeRequest) {
	ctx := c.Request.Context()
	if req.Tool == "" {
		api.ServiceError(c, http.StatusBadRequest, "bad_request", `tool is required, e.g. {"tool": "shell:exec", "params": {"command": "ls"}}`)
		return
	}
	_, actor := caller(c)
	t, err := h.Tools.Lookup(ctx, s.Scope(), req.Tool)
	if err != nil {
		h.toolError(c, err)
		return
	}
	ts, err := h.toolScope(ctx, s.AppID)
	if err != nil {
		h.log().Warn("sandbox service API: the session's tools", "session", s.ID, "err", err)
		api.ServiceError(c, http.StatusServiceUnavailable, api.ErrorKind(http.StatusServiceUnavailable), "could not read the session's app to check its tools; retry later")
		return
	}
	if !ts.allows(t.Name) {
		api.ServiceError(c, http.StatusForbidden, api.ErrorKind(http.StatusForbidden), ts.refusal(t.Name))
		return
	}
	actor.Tool = t.Name
	stream := req.Stream || strings.Contains(c.GetHeader("Accept"), "text/event-stream")
	call := registry.Call{Scope: s.Scope(), Actor: actor, Params: req.Params}
	var sse *eventStream
	if stream {
		// Params are checked before the stream starts, so a bad call is
		// still answered with its status.
		if err := t.Check(registry.Params(req.Params)); err != nil {
			h.toolError(c, err)
			return
		}
		sse = startEvents(c)
		call.OnOutput = func(st sandbox.Stream, p []byte) {
			name := "stdout"
			if st == sandbox.Stderr {
				name = "stderr"
			}
			sse.send("output", gin.H{"stream": name, "text": string(p)})
		}
	}
	start := time.Now()
	res, err := h.Tools.Execute(ctx, t, call)
	if err != nil {
		if sse != nil {
			if errors.Is(err, context.Canceled) {
				return // the caller has gone
			}
			// The status has gone with the stream: the error is its last
			// event, in the one shape.
			sse.send("error", h.classify(c.FullPath(), err).Body())
			return
		}
		h.toolError(c, err)
		return
	}
	out := executeResult{Tool: t.Name, IsError: res.IsError, Text: res.Text, Output: res.Output, DurationMs: time.Since(start).Milliseconds()}
	if out.Output == nil {
		out.Output = gin.H{"text": res.Text}
	}
	if sse != nil {
		sse.send("result", out)
		return
	}
	c.JSON(http.StatusOK, out)
}

// eventStream writes Server-Sent Events.
type eventStream struct{ c *gin.Context }

func startEvents(c *gin.Context) *eventStream {
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Writer.Flush()
	return &eventStream{c: c}
}

func (e *eventStream) send(event string, v any) {
	data, _ := json.Marshal(v)
	fmt.Fprintf(e.c.Writer, "event: %s\ndata: %s\n\n", event, data)
	e.c.Writer.Flush()
}

// Download serves GET /api/sandbox/v1/sessions/{id}/files?path=: a file,
// streamed, or a directory as a ZIP.
func (h *API) Download(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	at := c.Query("path")
	if at == "" {
		api.ServiceError(c, http.StatusBadRequest, "bad_request", "path is required, e.g. ?path=/workspace/report.csv")
		return
	}
	_, actor := caller(c)
	actor.Kind = sandbox.ActorFiles
	fs, err := h.Sandboxes.Files(c.Request.Context(), s.Scope(), actor)
	if err != nil {
		h.sandboxFailure(c, err)
		return
	}
	files.SendFile(c, fs, at)
}

// Upload serves PUT /api/sandbox/v1/sessions/{id}/files?path=: the body
// becomes the file, replaced atomically.
func (h *API) Upload(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	at := c.Query("path")
	if at == "" {
		api.ServiceError(c, http.StatusBadRequest, "bad_request", "path is required, e.g. ?path=/workspace/data/in.csv")
		return
	}
	if _, err := sandbox.WorkspaceRel(at); err != nil {
		h.sandboxFailure(c, err)
		return
	}
	max := h.MaxUpload
	if max <= 0 {
		max = 64 << 20
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.ServiceError(c, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the file is over %d MiB (FLOWBOX_SANDBOX_API_MAX_UPLOAD_MIB)", max>>20))
		} else {
			api.ServiceError(c, http.StatusBadRequest, "bad_request", "could not read the upload: "+err.Error())
		}
		return
	}
	if err := h.Storage.CheckWrite(c.Request.Context(), s.Scope(), at, int64(len(data))); err != nil {
		h.sandboxFailure(c, err)
		return
	}
	_, actor := caller(c)
	actor.Kind = sandbox.ActorFiles
	files, err := h.Sandboxes.Files(c.Request.Context(), s.Scope(), actor)
	if err == nil {
		err = files.WriteFile(c.Request.Context(), at, data)
	}
	if err != nil {
		h.sandboxFailure(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"path": at, "size": len(data)})
}
