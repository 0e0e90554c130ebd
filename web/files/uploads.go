package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/workspace"
	"github.com/flowbox/flowbox/web/api"
)

// Workspace is the chats' uploaded and intermediate files on the engine's
// host (workspace.Store).
type Workspace interface {
	Save(ctx context.Context, scope sandbox.Scope, dir, name string, r io.Reader) (workspace.File, error)
	List(ctx context.Context, scope sandbox.Scope, area workspace.Area, dir string) ([]workspace.Entry, error)
	Delete(ctx context.Context, scope sandbox.Scope, area workspace.Area, p string) error
}

// ChatCreator records a chat before its first message (history.Store).
type ChatCreator interface {
	Create(ctx context.Context, chat history.Chat, title string, now time.Time) (history.Chat, error)
}

// Uploads serves the upload API (K2): files a user gives the
// agent, streamed into the chat's /workspace/uploads on the host, with
// the chat's own authorization. An upload to a chat that does not exist
// yet creates it, so files can be attached before the first message.
type Uploads struct {
	Files  Workspace
	Chats  ChatCreator
	Access api.ChatAccess
	// MaxFiles bounds the files of one request; default 100.
	MaxFiles int
	Now      func() time.Time
	// Disk refuses uploads while the data disk is low; nil: no guard.
	// The chat quota is Files' own (Save).
	Disk interface{ Check() error }
}

// target checks the caller may reach the chat (write for changes) and
// names its sandbox scope: the chat of ?userId=, or for an app key of its
// end user ?customUid= ("api" when none, as in the chat API), or the
// caller's own. It answers the client itself when the request goes no
// further.
func (h *Uploads) target(c *gin.Context, appID string, write bool) (sandbox.Scope, bool) {
	chatID := c.Param("chatId")
	if appID == "" {
		api.Error(c, http.StatusBadRequest, "appId is required (a query parameter, or a form field before the files)")
		return sandbox.Scope{}, false
	}
	if problem := ChatIDProblem(chatID); problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return sandbox.Scope{}, false
	}
	action := "list"
	if write {
		action = "write"
	}
	if !api.VisitorFiles(c, action) {
		return sandbox.Scope{}, false
	}
	user, problem := h.Access.Whose(api.Caller(c), c.Query("userId"), c.Query("customUid"))
	if problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return sandbox.Scope{}, false
	}
	owner, err := h.Access.ChatOwner(c.Request.Context(), api.Caller(c), appID, user, chatID, write)
	switch {
	case errors.Is(err, api.ErrNoAccess):
		api.Error(c, http.StatusNotFound, fmt.Sprintf("no chat %q", chatID))
		return sandbox.Scope{}, false
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not check access to the chat; retry later")
		return sandbox.Scope{}, false
	}
	return sandbox.Scope{AppID: appID, UserID: owner, ChatID: chatID}, true
}

// ChatIDProblem says what is wrong with a chat id a client chose, or "".
func ChatIDProblem(chatID string) string {
	if chatID == "" || len(chatID) > 128 || strings.ContainsFunc(chatID, func(r rune) bool { return r == '/' || unicode.IsControl(r) }) {
		return "the chat id must be 1 to 128 characters without slashes or control characters"
	}
	return ""
}

// uploadError answers an error of the workspace.
func uploadError(c *gin.Context, err error, saved []workspace.File) {
	f, ok := api.FailureOf(err)
	if !ok {
		f.Message = "could not store the file; retry later"
	}
	if len(saved) > 0 {
		f.Message += fmt.Sprintf(" (%d file(s) before it were stored: %s)", len(saved), strings.Join(names(saved), ", "))
	}
	body := f.Body()
	body["files"] = saved
	if f.RetryAfter != "" {
		c.Header("Retry-After", f.RetryAfter)
	}
	c.AbortWithStatusJSON(f.Status, body)
}

func names(files []workspace.File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Name
	}
	return out
}

// Upload serves POST /api/uploads/{chatId}: multipart/form-data with one
// or more "file" parts, streamed to disk one at a time, never whole in
// memory; appId (and for app keys customUid, and optionally dir, a
// directory of uploads) as query parameters or form fields before the
// files. It answers 201 with the files as stored (cleaned and, when a
// name was taken, numbered names).
func (h *Uploads) Upload(c *gin.Context) {
	ct, params, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		api.Error(c, http.StatusUnsupportedMediaType, `send the files as multipart/form-data, each in a part named "file"`)
		return
	}
	mr, err := c.Request.MultipartReader()
	if err != nil {
		api.Error(c, http.StatusBadRequest, "the multipart body cannot be read: "+err.Error())
		return
	}
	maxFiles := h.MaxFiles
	if maxFiles <= 0 {
		maxFiles = 100
	}
	fields := map[string]string{"appId": c.Query("appId"), "dir": c.Query("dir")}
	var (
		tgt     sandbox.Scope
		checked bool
		saved   []workspace.File
	)
	ctx := c.Request.Context()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			uploadError(c, fmt.Errorf("%w: the multipart body is broken: %v", sandbox.ErrInvalidPath, err), saved)
			return
		}
		switch part.FormName() {
		case "appId", "dir", "customUid", "userId":
			v, err := io.ReadAll(io.LimitReader(part, 4096))
			if err != nil {
				uploadError(c, err, saved)
				return
			}
			if fields[part.FormName()] == "" {
				fields[part.FormName()] = string(v)
			}
			if name := part.FormName(); (name == "customUid" || name == "userId") && c.Query(name) == "" {
				q := c.Request.URL.Query()
				q.Set(name, string(v))
				c.Request.URL.RawQuery = q.Encode()
			}
			continue
		case "file":
		default:
			_, _ = io.Copy(io.Discard, part)
			continue
		}
		if !checked {
			if tgt, checked = h.target(c, fields["appId"], true); !checked {
				return
			}
			if !h.createChat(c, tgt, part.FileName()) {
				return
			}
		}
		if len(saved) == maxFiles {
			uploadError(c, fmt.Errorf("%w: at most %d files in one request; send the rest in another", sandbox.ErrInvalidPath, maxFiles), saved)
			return
		}
		if h.Disk != nil {
			if err := h.Disk.Check(); err != nil {
				uploadError(c, err, saved)
				return
			}
		}
		name := part.FileName()
		if name == "" {
			uploadError(c, fmt.Errorf("%w: a file part has no filename; give each file its name", sandbox.ErrInvalidPath), saved)
			return
		}
		f, err := h.Files.Save(ctx, tgt, fields["dir"], name, part)
		if err != nil {
			uploadError(c, err, saved)
			return
		}
		saved = append(saved, f)
	}
	if len(saved) == 0 {
		api.Error(c, http.StatusBadRequest, `no files: send each in a multipart part named "file" with a filename`)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"chatId": tgt.ChatID, "files": saved})
}

// createChat records the chat when it does not exist yet, titled after
// the first file, so the user finds it in their list before writing.
func (h *Uploads) createChat(c *gin.Context, tgt sandbox.Scope, first string) bool {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if _, err := h.Chats.Create(c.Request.Context(), history.Of(tgt), first, now()); err != nil {
		api.Error(c, http.StatusInternalServerError, "could not record the chat; retry later")
		return false
	}
	return true
}

// areaOf reads the area query parameter: uploads (default) or
// intermediate.
func areaOf(c *gin.Context) (workspace.Area, bool) {
	switch a := workspace.Area(c.DefaultQuery("area", string(workspace.Uploads))); a {
	case workspace.Uploads, workspace.Intermediate:
		return a, true
	default:
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("area %q: use uploads or intermediate", a))
		return "", false
	}
}

// List serves GET /api/uploads/{chatId}/files?appId=&area=&dir=: the
// files of the chat's uploads (or intermediate files), from the host,
// without starting the sandbox. A chat without files has none.
func (h *Uploads) List(c *gin.Context) {
	area, ok := areaOf(c)
	if !ok {
		return
	}
	tgt, ok := h.target(c, c.Query("appId"), false)
	if !ok {
		return
	}
	files, err := h.Files.List(c.Request.Context(), tgt, area, c.Query("dir"))
	if errors.Is(err, sandbox.ErrNotFound) && c.Query("dir") == "" {
		files, err = nil, nil
	}
	if err != nil {
		uploadError(c, err, nil)
		return
	}
	if files == nil {
		files = []workspace.Entry{}
	}
	c.JSON(http.StatusOK, gin.H{"area": area, "files": files})
}

// Delete serves DELETE /api/uploads/{chatId}/files?appId=&area=&path=:
// one file of the chat's uploads (or intermediate files).
func (h *Uploads) Delete(c *gin.Context) {
	area, ok := areaOf(c)
	if !ok {
		return
	}
	if c.Query("path") == "" {
		api.Error(c, http.StatusBadRequest, "path is required: the file to delete, e.g. data.csv")
		return
	}
	tgt, ok := h.target(c, c.Query("appId"), true)
	if !ok {
		return
	}
	if err := h.Files.Delete(c.Request.Context(), tgt, area, c.Query("path")); err != nil {
		uploadError(c, err, nil)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": c.Query("path"), "area": area})
}
