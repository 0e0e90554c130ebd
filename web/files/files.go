package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// SandboxFiles is the part of sandbox.Manager the file API uses.
type SandboxFiles interface {
	Files(ctx context.Context, scope sandbox.Scope, actor sandbox.Actor) (sandbox.Files, error)
	Lookup(ctx context.Context, scope sandbox.Scope) (sandbox.Instance, error)
}

// Handler serves the sandbox file API (F1, F2): list, read and write
// a chat's /workspace, download a file or a directory as a ZIP, and say
// whether a chat has a sandbox without creating one.
type Handler struct {
	Sandboxes SandboxFiles
	Access    api.ChatAccess
	// MaxRead bounds a file read into a JSON answer (default 1 MiB);
	// larger files are downloaded.
	MaxRead int64
	// MaxWrite bounds a written file (default 1 MiB).
	MaxWrite int64
	// Storage refuses writes on a low data disk or past the chat quota.
	Storage Storage
	// Procs serves the chat's background processes (L3); nil: the
	// API answers that this engine keeps none.
	Procs Processes
	// Previews keeps the chats' preview links (L2); nil: the API
	// answers that this engine serves none.
	Links Previews
}

type fileRequest struct {
	Action string `json:"action"`
	AppID  string `json:"appId"`
	ChatID string `json:"chatId"`
	// UserID names another user's chat (admins, the app's owner and
	// keys); CustomUID an app key's end user. Neither: the caller's.
	UserID    string  `json:"userId"`
	CustomUID string  `json:"customUid"`
	Path      string  `json:"path"`
	Content   *string `json:"content"`
	// A background process (processes.go): its id and where to read
	// its output from.
	ID     string `json:"id"`
	Offset int64  `json:"offset"`
	// A preview link (previews.go): its port, whether it is shared and
	// how long it lasts from now.
	Port int `json:"port"`
	// Files: the link to the workspace's files rather than to a port.
	Files    bool  `json:"files"`
	Shared   *bool `json:"shared"`
	TTLHours int   `json:"ttlHours"`
}

func (h *Handler) limits() (read, write int64) {
	read, write = h.MaxRead, h.MaxWrite
	if read <= 0 {
		read = 1 << 20
	}
	if write <= 0 {
		write = 1 << 20
	}
	return read, write
}

// bind reads the JSON body (bounded) and checks the chat; it answers the
// client itself and returns ok=false when the request goes no further.
func (h *Handler) bind(c *gin.Context, bodyLimit int64, write bool) (req fileRequest, scope sandbox.Scope, ok bool) {
	return h.bindWith(c, bodyLimit, write, func(r fileRequest) string { return r.Action })
}

// bindAs is bind for a small body whose action, as a share link's file
// setting judges it ("write" or not), is kind of the request.
func (h *Handler) bindAs(c *gin.Context, kind func(fileRequest) string) (req fileRequest, scope sandbox.Scope, ok bool) {
	return h.bindWith(c, 64<<10, false, kind)
}

func (h *Handler) bindWith(c *gin.Context, bodyLimit int64, write bool, kind func(fileRequest) string) (req fileRequest, scope sandbox.Scope, ok bool) {
	body := http.MaxBytesReader(c.Writer, c.Request.Body, bodyLimit)
	if err := api.DecodeJSON(body, &req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.Error(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", bodyLimit))
		} else {
			api.Error(c, http.StatusBadRequest, "the request body is not valid JSON: "+err.Error())
		}
		return req, scope, false
	}
	if req.AppID == "" || req.ChatID == "" {
		api.Error(c, http.StatusBadRequest, "appId and chatId are required")
		return req, scope, false
	}
	if !api.VisitorFiles(c, kind(req)) {
		return req, scope, false
	}
	user, problem := h.Access.Whose(api.Caller(c), req.UserID, req.CustomUID)
	if problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return req, scope, false
	}
	owner, err := h.Access.ChatOwner(c.Request.Context(), api.Caller(c), req.AppID, user, req.ChatID, write || kind(req) == "write")
	if err != nil {
		if errors.Is(err, api.ErrNoAccess) {
			api.Error(c, http.StatusNotFound, fmt.Sprintf("no chat %q", req.ChatID))
		} else {
			api.Error(c, http.StatusInternalServerError, "could not check access to the chat; retry later")
		}
		return req, scope, false
	}
	return req, sandbox.Scope{AppID: req.AppID, UserID: owner, ChatID: req.ChatID}, true
}

// File serves POST /api/core/ai/sandbox/file (F1). Opening a chat's files
// creates or wakes its sandbox (S2).
func (h *Handler) File(c *gin.Context) {
	maxRead, maxWrite := h.limits()
	req, scope, ok := h.bind(c, maxWrite+64<<10, false)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	switch req.Action {
	case "list", "read", "write":
	default:
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("action %q: use list, read or write", req.Action))
		return
	}
	if req.Action == "write" && req.Content == nil {
		api.Error(c, http.StatusBadRequest, "write needs content")
		return
	}
	if _, err := sandbox.WorkspaceRel(req.Path); err != nil {
		api.Fail(c, err, "the sandbox could not do it")
		return
	}
	p, _ := api.PrincipalOf(c)
	files, err := h.Sandboxes.Files(ctx, scope, sandbox.Actor{UserID: p.UserID, Kind: sandbox.ActorFiles})
	if err != nil {
		api.Fail(c, err, "the sandbox could not do it")
		return
	}
	switch req.Action {
	case "list":
		list, err := files.List(ctx, req.Path)
		if err != nil {
			api.Fail(c, err, "the sandbox could not do it")
			return
		}
		c.JSON(http.StatusOK, gin.H{"action": "list", "files": list})
	case "read":
		data, err := files.ReadFile(ctx, req.Path, maxRead)
		if err != nil {
			api.Fail(c, err, "the sandbox could not do it")
			return
		}
		if isBinary(data) {
			api.Error(c, http.StatusUnsupportedMediaType, fmt.Sprintf("%s is a binary file (%d bytes): download it instead", req.Path, len(data)))
			return
		}
		c.JSON(http.StatusOK, gin.H{"action": "read", "content": string(data)})
	case "write":
		if int64(len(*req.Content)) > maxWrite {
			api.Error(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("content is %d bytes, the limit is %d", len(*req.Content), maxWrite))
			return
		}
		if err := h.Storage.CheckWrite(ctx, scope, req.Path, int64(len(*req.Content))); err != nil {
			api.Fail(c, err, "the sandbox could not do it")
			return
		}
		if err := files.WriteFile(ctx, req.Path, []byte(*req.Content)); err != nil {
			api.Fail(c, err, "the sandbox could not do it")
			return
		}
		c.JSON(http.StatusOK, gin.H{"action": "write", "success": true})
	}
}

// Download serves POST /api/core/ai/sandbox/download (F2): a file as a
// stream, a directory as a ZIP built while it is sent.
func (h *Handler) Download(c *gin.Context) {
	_, maxWrite := h.limits()
	req, scope, ok := h.bind(c, maxWrite+64<<10, false)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	p, _ := api.PrincipalOf(c)
	files, err := h.Sandboxes.Files(ctx, scope, sandbox.Actor{UserID: p.UserID, Kind: sandbox.ActorFiles})
	if err != nil {
		api.Fail(c, err, "the sandbox could not do it")
		return
	}
	SendFile(c, files, req.Path)
}

// SendFile answers with a workspace file, streamed, or a directory as a
// ZIP built while it is sent.
func SendFile(c *gin.Context, files sandbox.Files, at string) {
	ctx := c.Request.Context()
	info, err := files.Stat(ctx, at)
	if err != nil {
		api.Fail(c, err, "the sandbox could not do it")
		return
	}
	if info.Type == "directory" {
		c.Header("Content-Type", "application/zip")
		c.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": info.Name + ".zip"}))
		c.Status(http.StatusOK)
		// Headers go with the first byte of the archive: a refusal before
		// it (file redaction refuses archives) is still answered as such.
		// Once the ZIP streams, a failure can only cut it short, which the
		// client sees as a broken ZIP.
		if err := files.Zip(ctx, at, c.Writer); err != nil && !c.Writer.Written() {
			c.Writer.Header().Del("Content-Disposition")
			api.Fail(c, err, "the sandbox could not do it")
		}
		return
	}
	rc, fi, err := files.Open(ctx, at)
	if err != nil {
		api.Fail(c, err, "the sandbox could not do it")
		return
	}
	defer rc.Close()
	ctype := mime.TypeByExtension(path.Ext(fi.Name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	c.Header("Content-Type", ctype)
	c.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fi.Name}))
	c.Header("Content-Length", fmt.Sprint(fi.Size))
	c.Header("X-Content-Type-Options", "nosniff")
	c.Status(http.StatusOK)
	_, _ = io.Copy(c.Writer, rc)
}

// Status serves POST /api/core/ai/sandbox/status: whether the chat has a
// sandbox, without creating one, and what it uses while it runs (L4).
func (h *Handler) Status(c *gin.Context) {
	_, scope, ok := h.bind(c, 64<<10, false)
	if !ok {
		return
	}
	inst, err := h.Sandboxes.Lookup(c.Request.Context(), scope)
	if errors.Is(err, sandbox.ErrNotFound) {
		c.JSON(http.StatusOK, gin.H{"exists": false})
		return
	}
	if err != nil {
		api.Fail(c, err, "the sandbox could not do it")
		return
	}
	out := gin.H{"exists": true, "status": inst.Status, "lastActiveAt": inst.LastActiveAt, "provider": inst.Provider}
	// What it uses (L4), while it runs and the provider reads it.
	if mr, ok := h.Sandboxes.(interface {
		Metrics(ctx context.Context, scope sandbox.Scope) (sandbox.Metrics, error)
	}); ok && inst.Status == sandbox.StatusRunning {
		if m, err := mr.Metrics(c.Request.Context(), scope); err == nil {
			out["metrics"] = m
		}
	}
	c.JSON(http.StatusOK, out)
}

// isBinary reports data that is not text: invalid UTF-8 or NUL bytes.
func isBinary(data []byte) bool {
	if !utf8.Valid(data) {
		return true
	}
	for _, b := range data {
		if b == 0 {
			return true
		}
	}
	return false
}
