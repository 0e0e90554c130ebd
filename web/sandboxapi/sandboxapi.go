package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/sessions"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/files"
)

// SessionStore keeps the service API's sessions (sessions.Store).
type SessionStore interface {
	Create(ctx context.Context, s sessions.Session) error
	Get(ctx context.Context, id string) (sessions.Session, error)
	List(ctx context.Context, ownerID string, labels map[string]string) ([]sessions.Session, error)
	Delete(ctx context.Context, id string) error
}

// API serves the sandbox service API under /api/sandbox/v1 (A1,
// docs/SANDBOX_API.md): sessions, tools from the registry, files, and
// the same tools over MCP.
type API struct {
	Tools     *registry.Registry
	Sessions  SessionStore
	Sandboxes files.SandboxFiles
	Apps      api.AppReader
	// ServiceTools are the tools sessions without an app may call (names,
	// "mcp:{server}" for a server's every tool, or "prefix:*"); nil:
	// DefaultServiceTools. Sessions of an app call the sandbox's tools
	// and what the app's tool-call nodes list.
	ServiceTools []string
	Access       *api.Access
	// Limits, Network and Egress are the operator's: a session may ask
	// for less, never more.
	Limits  sandbox.Limits
	Network bool
	Egress  []string
	// MaxUpload bounds an uploaded file (default 64 MiB).
	MaxUpload int64
	// Storage refuses uploads on a low data disk or past the chat quota.
	Storage files.Storage
	// Metrics reads a session's sandbox's metrics (L4); nil: none.
	Metrics interface {
		Metrics(ctx context.Context, scope sandbox.Scope) (sandbox.Metrics, error)
	}
	// Snapshots keeps the sessions' snapshots (R3); nil: none.
	Snapshots Snapshots
	Now       func() time.Time
	Log       *slog.Logger

	mcpOnce    sync.Once
	mcpHandler *mcp.StreamableHTTPHandler
}

// toolError answers an error of running a tool.
func (h *API) toolError(c *gin.Context, err error) {
	if errors.Is(err, context.Canceled) {
		c.Abort()
		return
	}
	h.classify(c.FullPath(), err).Write(c)
}

// sandboxFailure answers an error of the sandbox layer or the store.
func (h *API) sandboxFailure(c *gin.Context, err error) {
	h.classify(c.FullPath(), err).Write(c)
}

// classify maps an error of a call to the API's answer (api.FailureOf); an
// error the table does not know is logged and answered 500.
func (h *API) classify(where string, err error) api.Failure {
	if f, ok := api.FailureOf(err); ok {
		return f
	}
	h.log().Error("sandbox service API", "at", where, "err", err)
	return api.Failure{Status: http.StatusInternalServerError, Kind: "internal", Message: "the sandbox could not do it; retry later"}
}

func (h *API) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

func (h *API) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// caller is the authenticated caller and the actor its calls run as.
func caller(c *gin.Context) (owner string, actor sandbox.Actor) {
	p, _ := api.PrincipalOf(c)
	return p.UserID, sandbox.Actor{UserID: p.UserID, Kind: sandbox.ActorService, Via: p.KeyID}
}

// SessionOptions is what a caller asks of a new session.
type SessionOptions struct {
	Name               string            `json:"name"`
	AppID              string            `json:"appId"`
	Limits             *sandbox.Limits   `json:"limits"`
	Network            string            `json:"network"`
	Egress             []string          `json:"egress"`
	IdleTimeoutSeconds int               `json:"idleTimeoutSeconds"`
	Labels             map[string]string `json:"labels"`
	Start              bool              `json:"start"`
	// FromSnapshot starts the session's sandbox as a copy of a snapshot
	// of another of the caller's sessions (R3).
	FromSnapshot *SnapshotRef `json:"fromSnapshot"`
}

var labelKey = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)

// session checks the options against the operator's settings and the
// caller's rights and makes the session they describe; problem says,
// with its status, why they cannot be had.
func (h *API) session(c *gin.Context, o SessionOptions) (s sessions.Session, status int, problem string) {
	p, _ := api.PrincipalOf(c)
	s = sessions.Session{ID: sessions.NewID(), Name: strings.TrimSpace(o.Name), OwnerID: p.UserID, AppID: o.AppID,
		Labels: o.Labels, IdleTimeout: sessions.DefaultIdle, CreatedAt: h.now().UTC().Truncate(time.Millisecond)}
	bad := func(msg string) (sessions.Session, int, string) {
		return sessions.Session{}, http.StatusBadRequest, msg
	}
	if utf8.RuneCountInString(s.Name) > 128 {
		return bad("name: at most 128 characters")
	}
	switch {
	case p.Bound():
		if o.AppID != "" && o.AppID != p.AppID {
			return sessions.Session{}, http.StatusForbidden, "an app key makes sessions of its own app only; leave appId out"
		}
		s.AppID = p.AppID
	case o.AppID != "":
		app, err := h.Apps.Get(c.Request.Context(), o.AppID)
		if errors.Is(err, apps.ErrNotFound) || err == nil && !h.Access.CanUseApp(api.Caller(c), app) {
			return sessions.Session{}, http.StatusForbidden, fmt.Sprintf("appId: no app %q you may use", o.AppID)
		} else if err != nil {
			return sessions.Session{}, http.StatusServiceUnavailable, "could not read the app; retry later"
		}
	}
	if l := o.Limits; l != nil {
		check := func(field string, asked, max float64) string {
			switch {
			case asked < 0:
				return fmt.Sprintf("limits.%s: must not be negative", field)
			case asked > 0 && max == 0:
				return fmt.Sprintf("limits.%s: this engine leaves it to the sandbox provider, which a session cannot change; leave it out", field)
			case asked > max:
				return fmt.Sprintf("limits.%s: %v is over this engine's %v; ask for at most that", field, asked, max)
			}
			return ""
		}
		for _, msg := range []string{check("cpuCount", l.CPUCount, h.Limits.CPUCount),
			check("memoryMiB", float64(l.MemoryMiB), float64(h.Limits.MemoryMiB)), check("pids", float64(l.Pids), float64(h.Limits.Pids))} {
			if msg != "" {
				return bad(msg)
			}
		}
		if l.DiskGiB != 0 {
			return bad("limits.diskGiB: a session cannot set a disk limit; leave it out")
		}
		s.Limits = sandbox.Limits{CPUCount: l.CPUCount, MemoryMiB: l.MemoryMiB, Pids: l.Pids}
	}
	switch o.Network {
	case "", "none":
		if h.Network && o.Network == "none" {
			return bad(`network: this engine gives every sandbox the network (FLOWBOX_SANDBOX_NETWORK); "none" cannot be had here`)
		}
		if len(o.Egress) > 0 {
			return bad(`egress: give it with "network": "egress"`)
		}
	case "egress":
		if h.Network {
			return bad(`network: this engine gives every sandbox the network (FLOWBOX_SANDBOX_NETWORK); leave network out`)
		}
		if len(o.Egress) == 0 {
			return bad(`egress: "network": "egress" needs the host names, e.g. ["pypi.org"]`)
		}
		list, err := egress.ParsePatterns(o.Egress)
		if err != nil {
			return bad("egress: " + err.Error())
		}
		if kept := egress.Narrow(h.Egress, list); len(kept) != len(list) {
			var out []string
			for _, q := range list {
				if !slices.Contains(kept, q) {
					out = append(out, q)
				}
			}
			return bad(fmt.Sprintf("egress: this engine's allowlist (FLOWBOX_SANDBOX_EGRESS) does not cover %s", strings.Join(out, ", ")))
		}
		s.Egress = list
	case "full":
		if !h.Network {
			return bad(`network: this engine gives sandboxes no network; use "none", or "egress" with the hosts its allowlist covers`)
		}
	default:
		return bad(fmt.Sprintf(`network %q: use "none" or "egress"`, o.Network))
	}
	if o.IdleTimeoutSeconds != 0 {
		d := time.Duration(o.IdleTimeoutSeconds) * time.Second
		if d < sessions.MinIdle || d > sessions.MaxIdle {
			return bad(fmt.Sprintf("idleTimeoutSeconds: between %d and %d", int(sessions.MinIdle.Seconds()), int(sessions.MaxIdle.Seconds())))
		}
		s.IdleTimeout = d
	}
	if len(o.Labels) > 16 {
		return bad("labels: at most 16")
	}
	for k, v := range o.Labels {
		if !labelKey.MatchString(k) {
			return bad(fmt.Sprintf("labels: key %q: letters, digits, '.', '_' and '-', at most 63", k))
		}
		if len(v) > 256 {
			return bad(fmt.Sprintf("labels.%s: at most 256 bytes", k))
		}
	}
	return s, 0, ""
}

// sessionView is a session as the API shows it.
type sessionView struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	AppID              string            `json:"appId"`
	Labels             map[string]string `json:"labels"`
	Limits             sessionLimits     `json:"limits"`
	Network            string            `json:"network"`
	Egress             []string          `json:"egress,omitempty"`
	IdleTimeoutSeconds int               `json:"idleTimeoutSeconds"`
	CreatedAt          time.Time         `json:"createdAt"`
	Status             string            `json:"status"`
	LastActiveAt       *time.Time        `json:"lastActiveAt,omitempty"`
}

// sessionLimits are the limits a session may set.
type sessionLimits struct {
	CPUCount  float64 `json:"cpuCount"`
	MemoryMiB int64   `json:"memoryMiB"`
	Pids      int64   `json:"pids"`
}

func (h *API) view(ctx context.Context, s sessions.Session) sessionView {
	v := sessionView{ID: s.ID, Name: s.Name, AppID: s.AppID, Labels: s.Labels,
		Limits: sessionLimits{CPUCount: s.Limits.CPUCount, MemoryMiB: s.Limits.MemoryMiB, Pids: s.Limits.Pids}, Network: "none", Egress: s.Egress,
		IdleTimeoutSeconds: int(s.IdleTimeout.Seconds()), CreatedAt: s.CreatedAt, Status: "none"}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	switch {
	case h.Network:
		v.Network = "full"
	case len(s.Egress) > 0:
		v.Network = "egress"
	}
	if inst, err := h.Sandboxes.Lookup(ctx, s.Scope()); err == nil {
		v.Status = string(inst.Status)
		if inst.Status == sandbox.StatusStopped {
			v.Status = "stopped" // the records keep the seed's spelling
		}
		at := inst.LastActiveAt
		v.LastActiveAt = &at
	}
	return v
}

// own reads the caller's session named in the path; another caller's
// answers as a missing one does.
func (h *API) own(c *gin.Context) (sessions.Session, bool) {
	id := c.Param("id")
	owner, _ := caller(c)
	s, err := h.Sessions.Get(c.Request.Context(), id)
	switch {
	case errors.Is(err, sessions.ErrNotFound) || err == nil && s.OwnerID != owner:
		api.ServiceError(c, http.StatusNotFound, "not_found", fmt.Sprintf("no session %q; GET /api/sandbox/v1/sessions lists yours", id))
		return sessions.Session{}, false
	case err != nil:
		api.ServiceError(c, http.StatusServiceUnavailable, "unavailable", "could not read the session; retry later")
		return sessions.Session{}, false
	}
	return s, true
}

// bindJSON reads a bounded JSON body; an empty one leaves v as it is.
func bindJSON(c *gin.Context, v any) bool {
	body := http.MaxBytesReader(c.Writer, c.Request.Body, 8<<20)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.ServiceError(c, http.StatusRequestEntityTooLarge, "too_large", "the request body is over 8 MiB; upload files with PUT .../files")
		} else {
			api.ServiceError(c, http.StatusBadRequest, "bad_request", "could not read the request body: "+err.Error())
		}
		return false
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return true
	}
	if err := api.DecodeJSON(strings.NewReader(string(data)), v); err != nil {
		api.ServiceError(c, http.StatusBadRequest, "bad_request", "the request body is not valid JSON: "+err.Error())
		return false
	}
	return true
}

// start makes a session's sandbox run now; a failure deletes the session
// again, so that nothing is left of a creation that was refused.
func (h *API) start(c *gin.Context, s sessions.Session) bool {
	if err := h.Tools.Initialize(c.Request.Context(), s.Scope()); err != nil {
		h.destroy(c.Request.Context(), s)
		h.toolError(c, err)
		return false
	}
	return true
}

// destroy deletes a session: its per-session resources through the
// registry's Cleanup (the sandbox through the deletion path), then its
// record. It goes on when the caller has gone.
func (h *API) destroy(ctx context.Context, s sessions.Session) error {
	ctx = context.WithoutCancel(ctx)
	if err := h.Tools.Cleanup(ctx, s.Scope()); err != nil {
		return err
	}
	return h.Sessions.Delete(ctx, s.ID)
}

// CreateSession serves POST /api/sandbox/v1/sessions.
func (h *API) CreateSession(c *gin.Context) {
	var o SessionOptions
	if !bindJSON(c, &o) {
		return
	}
	s, status, problem := h.session(c, o)
	if problem != "" {
		api.ServiceError(c, status, api.ErrorKind(status), problem)
		return
	}
	if err := h.Sessions.Create(c.Request.Context(), s); err != nil {
		h.sandboxFailure(c, err)
		return
	}
	if o.FromSnapshot != nil && !h.fromSnapshot(c, o.FromSnapshot, s) {
		_ = h.destroy(c.Request.Context(), s)
		return
	}
	if o.Start && !h.start(c, s) {
		return
	}
	c.JSON(http.StatusCreated, h.view(c.Request.Context(), s))
}

// Warmup serves POST /api/sandbox/v1/warmup: sessions created and
// started ahead of their first call.
func (h *API) Warmup(c *gin.Context) {
	var o struct {
		SessionOptions
		Count *int `json:"count"`
	}
	if !bindJSON(c, &o) {
		return
	}
	n := 1
	if o.Count != nil {
		n = *o.Count
	}
	if n < 1 || n > 10 {
		api.ServiceError(c, http.StatusBadRequest, "bad_request", "count: between 1 and 10")
		return
	}
	ctx := c.Request.Context()
	var made []sessions.Session
	for range n {
		s, status, problem := h.session(c, o.SessionOptions)
		if problem != "" {
			api.ServiceError(c, status, api.ErrorKind(status), problem)
			return
		}
		err := h.Sessions.Create(ctx, s)
		if err == nil {
			made = append(made, s)
			err = h.Tools.Initialize(ctx, s.Scope())
		}
		if err != nil {
			// All or nothing: what was made for this call goes again.
			for _, m := range made {
				_ = h.destroy(ctx, m)
			}
			h.toolError(c, err)
			return
		}
	}
	out := make([]sessionView, len(made))
	for i, s := range made {
		out[i] = h.view(ctx, s)
	}
	c.JSON(http.StatusCreated, gin.H{"sessions": out})
}

// ListSessions serves GET /api/sandbox/v1/sessions (?label=k=v).
func (h *API) ListSessions(c *gin.Context) {
	labels := map[string]string{}
	for _, l := range c.QueryArray("label") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || !labelKey.MatchString(k) {
			api.ServiceError(c, http.StatusBadRequest, "bad_request", fmt.Sprintf("label %q: write it as key=value", l))
			return
		}
		labels[k] = v
	}
	owner, _ := caller(c)
	list, err := h.Sessions.List(c.Request.Context(), owner, labels)
	if err != nil {
		h.sandboxFailure(c, err)
		return
	}
	out := make([]sessionView, 0, len(list))
	for _, s := range list {
		if !s.Temporary {
			out = append(out, h.view(c.Request.Context(), s))
		}
	}
	c.JSON(http.StatusOK, gin.H{"sessions": out})
}

// GetSession serves GET /api/sandbox/v1/sessions/{id}.
func (h *API) GetSession(c *gin.Context) {
	if s, ok := h.own(c); ok {
		c.JSON(http.StatusOK, h.view(c.Request.Context(), s))
	}
}

// SessionMetrics serves GET /api/sandbox/v1/sessions/{id}/metrics (L4):
// what the session's sandbox uses now. A sandbox that does not run has
// none: 409, not_running. It starts nothing.
func (h *API) SessionMetrics(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	if h.Metrics == nil {
		api.ServiceError(c, http.StatusNotImplemented, "unsupported", "this engine reads no sandbox metrics")
		return
	}
	m, err := h.Metrics.Metrics(c.Request.Context(), s.Scope())
	switch {
	case errors.Is(err, sandbox.ErrNotRunning), errors.Is(err, sandbox.ErrNotFound):
		api.ServiceError(c, http.StatusConflict, "not_running", "the session's sandbox is not running, so it uses nothing; it starts with the session's next call")
	case errors.Is(err, sandbox.ErrUnsupported):
		api.ServiceError(c, http.StatusNotImplemented, "unsupported", err.Error())
	case err != nil:
		h.sandboxFailure(c, err)
	default:
		c.JSON(http.StatusOK, gin.H{"id": s.ID, "metrics": m})
	}
}

// DeleteSession serves DELETE /api/sandbox/v1/sessions/{id}: it answers
// once the deletion is recorded; the sandbox goes shortly after.
func (h *API) DeleteSession(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	if err := h.destroy(c.Request.Context(), s); err != nil {
		h.sandboxFailure(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"id": s.ID, "deleted": true})
}
