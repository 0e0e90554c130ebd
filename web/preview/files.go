package preview

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/preview"
	"github.com/flowbox/flowbox/sandbox"
)

// FilesPolicy is the Content-Security-Policy of a workspace file served
// by a files link (preview.Files): the opaque origin of Policy, and
// nothing loaded or sent beyond the link's own files, inline code and
// data: URLs. A page the agent wrote, perhaps from what it read on the
// web, can show the workspace's files but not send them anywhere.
const FilesPolicy = Policy + "; default-src 'self' 'unsafe-inline' 'unsafe-eval' data: blob:; form-action 'none'; base-uri 'self'"

// serveFile answers a files link: rest is a path below /workspace; a
// directory is its index.html.
func (h *Handler) serveFile(c *gin.Context, link preview.Link, prefix, rest string) {
	if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
		c.Header("Allow", "GET, HEAD")
		page(c, http.StatusMethodNotAllowed, "Files are only read here", "A link to the workspace's files serves them to read; it takes no "+c.Request.Method+".")
		return
	}
	name := path.Clean("/workspace/" + strings.TrimPrefix(rest, "/"))
	if name != "/workspace" && !strings.HasPrefix(name, "/workspace/") {
		page(c, http.StatusNotFound, "No such file", "This link serves the files below /workspace only.")
		return
	}
	if strings.HasSuffix(rest, "/") {
		name = path.Join(name, "index.html")
	}
	ctx := c.Request.Context()
	files, err := h.Files.Files(ctx, link.Scope(), sandbox.Actor{UserID: link.UserID, Kind: sandbox.ActorFiles})
	var info sandbox.FileInfo
	if err == nil {
		info, err = files.Stat(ctx, name)
	}
	if err == nil && info.Type == "directory" {
		c.Redirect(http.StatusFound, prefix+rest+"/")
		return
	}
	var body io.ReadCloser
	if err == nil {
		body, info, err = files.Open(ctx, name)
	}
	var limit *sandbox.LimitError
	switch {
	case errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrInvalidPath):
		page(c, http.StatusNotFound, "No such file", "There is no file at "+name+" in this chat's workspace.")
		return
	case errors.Is(err, sandbox.ErrDeleted):
		page(c, http.StatusNotFound, "This chat's sandbox is gone", "The chat or its app was deleted.")
		return
	case errors.As(err, &limit):
		page(c, http.StatusServiceUnavailable, "The sandbox could not be started", limit.Error()+". Retry later.")
		return
	case err != nil:
		h.log().Warn("preview: read a workspace file", "path", name, "sandboxId", link.Scope().SandboxID(), "err", err)
		page(c, http.StatusBadGateway, "The file could not be read", "The chat's sandbox could not be reached. Retry in a moment.")
		return
	}
	defer body.Close()
	w := c.Writer
	w.Header().Set("Content-Security-Policy", FilesPolicy)
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", contentType(name))
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	if c.GetHeader("Origin") == "null" {
		// The page's own fetches come from its opaque origin.
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}
	w.WriteHeader(http.StatusOK)
	if c.Request.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, body)
}

// contentType is a file's type by its extension; text without one.
func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "text/plain; charset=utf-8"
}
