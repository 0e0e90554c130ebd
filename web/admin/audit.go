package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/web/api"
)

// AuditRecords reads the audit of sandbox calls (audit.Store).
type AuditRecords interface {
	Query(ctx context.Context, f audit.Filter, cursor string, limit int) (audit.Page, error)
	Each(ctx context.Context, f audit.Filter, fn func(audit.Record) error) error
}

// Audit serves the audit: every record to admins, an app's
// records to its owner.
type Audit struct {
	Records AuditRecords
	Apps    api.AppReader
	Access  *api.Access
	// Pending, when set, writes the records this process still holds
	// (audit.Writer.Flush) before a read, so that a page shows the
	// commands that just ended; a failure to is no reason not to answer.
	Pending func(context.Context) error
}

// flush writes the records still held, for at most a second.
func (h *Audit) flush(ctx context.Context) {
	if h.Pending == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = h.Pending(ctx)
}

// auditRecord is a record on the wire.
type auditRecord struct {
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	DurationMs  int64     `json:"durationMs"`
	Instance    string    `json:"instance"`
	Kind        string    `json:"kind"`
	ActorID     string    `json:"actorId,omitempty"`
	ActorKind   string    `json:"actorKind,omitempty"`
	ToolCallID  string    `json:"toolCallId,omitempty"`
	Via         string    `json:"via,omitempty"`
	AppID       string    `json:"appId"`
	ChatID      string    `json:"chatId"`
	UserID      string    `json:"userId"`
	SandboxID   string    `json:"sandboxId"`
	Tool        string    `json:"tool"`
	Command     string    `json:"command,omitempty"`
	Op          string    `json:"op,omitempty"`
	Path        string    `json:"path,omitempty"`
	Decision    string    `json:"decision"`
	Rule        string    `json:"rule,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Status      string    `json:"status"`
	ExitCode    int       `json:"exitCode"`
	StdoutBytes int64     `json:"stdoutBytes"`
	StderrBytes int64     `json:"stderrBytes"`
	Bytes       int64     `json:"bytes,omitempty"`
	Truncated   bool      `json:"truncated,omitempty"`
	TimedOut    bool      `json:"timedOut,omitempty"`
	OOMKilled   bool      `json:"oomKilled,omitempty"`
	PidsLimited bool      `json:"pidsLimited,omitempty"`
	Error       string    `json:"error,omitempty"`
	Transcript  string    `json:"transcript,omitempty"`
}

func wireAudit(r audit.Record) auditRecord {
	return auditRecord{
		ID: r.ID.Hex(), Time: r.Time, DurationMs: r.DurationMs, Instance: r.Instance, Kind: string(r.Kind),
		ActorID: r.ActorID, ActorKind: r.ActorKind, ToolCallID: r.ToolCallID, Via: r.Via,
		AppID: r.AppID, ChatID: r.ChatID, UserID: r.UserID, SandboxID: r.SandboxID,
		Tool: r.Tool, Command: r.Command, Op: r.Op, Path: r.Path,
		Decision: string(r.Decision), Rule: r.Rule, Reason: r.Reason, Status: string(r.Status), ExitCode: r.ExitCode,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes, Bytes: r.Bytes, Truncated: r.Truncated, TimedOut: r.TimedOut,
		OOMKilled: r.OOMKilled, PidsLimited: r.PidsLimited, Error: r.Error, Transcript: r.Transcript,
	}
}

// auditFilter reads the filters of the query string: user, actor, app,
// chat, decision, status, kind, exhausted (oom: the commands during which
// the OOM killer struck, pids: those that hit the process limit), since
// and until (RFC 3339). It answers the client itself when one is wrong.
func auditFilter(c *gin.Context) (audit.Filter, bool) {
	f := audit.Filter{
		UserID: c.Query("user"), ActorID: c.Query("actor"), AppID: c.Query("app"), ChatID: c.Query("chat"),
		Decision: audit.Decision(c.Query("decision")), Status: audit.Status(c.Query("status")), Kind: audit.Kind(c.Query("kind")),
	}
	bad := func(msg string) (audit.Filter, bool) {
		api.Error(c, http.StatusBadRequest, msg)
		return audit.Filter{}, false
	}
	if f.Decision != "" && !slices.Contains([]audit.Decision{audit.Allowed, audit.Refused, audit.Ask, audit.Approved, audit.Rejected}, f.Decision) {
		return bad("decision must be allowed, refused, ask, approved or rejected")
	}
	if f.Status != "" && !slices.Contains(audit.Statuses, f.Status) {
		return bad("status must be one of " + joinStatuses())
	}
	if f.Kind != "" && f.Kind != audit.KindCommand && f.Kind != audit.KindFile {
		return bad("kind must be command or file")
	}
	switch c.Query("exhausted") {
	case "":
	case "oom":
		f.OOMKilled = true
	case "pids":
		f.PidsLimited = true
	default:
		return bad("exhausted must be oom or pids")
	}
	for _, b := range []struct {
		key string
		to  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.Query(b.key); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return bad(b.key + " must be a time such as 2026-01-31T00:00:00Z")
			}
			*b.to = t
		}
	}
	return f, true
}

// List answers one page of the records the filters select, newest first:
// {"records": [...], "nextCursor": "..."} (empty on the last page). The
// query takes the filters of auditFilter, cursor (from the previous
// page) and limit (1 to 500, default 50).
func (h *Audit) List(c *gin.Context) {
	f, ok := auditFilter(c)
	if !ok {
		return
	}
	h.page(c, f)
}

// AppList is List for the records of one app, for its owner and admins.
func (h *Audit) AppList(c *gin.Context) {
	a, err := h.Apps.Get(c.Request.Context(), c.Param("appId"))
	switch {
	case err == nil && h.Access.CanEditApp(api.Caller(c), a):
	case err == nil && h.Access.CanUseApp(api.Caller(c), a):
		api.Error(c, http.StatusForbidden, "only the app's owner and admins may read its audit")
		return
	case err == nil || errors.Is(err, apps.ErrNotFound):
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(c.Param("appId")))
		return
	default:
		api.Error(c, http.StatusInternalServerError, "could not read the app; retry later")
		return
	}
	f, ok := auditFilter(c)
	if !ok {
		return
	}
	f.AppID = a.ID
	h.page(c, f)
}

func (h *Audit) page(c *gin.Context, f audit.Filter) {
	limit := audit.DefaultLimit
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			api.Error(c, http.StatusBadRequest, "limit must be a number from 1 to "+strconv.Itoa(audit.MaxLimit))
			return
		}
		limit = n
	}
	h.flush(c.Request.Context())
	p, err := h.Records.Query(c.Request.Context(), f, c.Query("cursor"), limit)
	switch {
	case errors.Is(err, audit.ErrBadCursor):
		api.Error(c, http.StatusBadRequest, "cursor is not one a previous page gave; start again without it")
		return
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not read the audit; retry later")
		return
	}
	recs := make([]auditRecord, len(p.Records))
	for i, r := range p.Records {
		recs[i] = wireAudit(r)
	}
	c.JSON(http.StatusOK, gin.H{"records": recs, "nextCursor": p.Next})
}

// Export streams every record the filters select, newest first, one JSON
// object a line, as a download. An export cut short by an error ends with
// a line {"error": "..."}, so that a reader can tell it is incomplete.
func (h *Audit) Export(c *gin.Context) {
	f, ok := auditFilter(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	h.flush(ctx)
	enc := json.NewEncoder(c.Writer)
	n := 0
	start := func() {
		c.Header("Content-Type", "application/x-ndjson; charset=utf-8")
		c.Header("Content-Disposition", `attachment; filename="flowbox-audit-`+time.Now().UTC().Format("20060102T150405Z")+`.jsonl"`)
		c.Header("X-Content-Type-Options", "nosniff")
		c.Status(http.StatusOK)
	}
	err := h.Records.Each(ctx, f, func(r audit.Record) error {
		if n == 0 {
			start()
		}
		n++
		if err := enc.Encode(wireAudit(r)); err != nil {
			return err
		}
		if n%200 == 0 {
			c.Writer.Flush()
		}
		return nil
	})
	switch {
	case err != nil && n == 0:
		api.Error(c, http.StatusInternalServerError, "could not read the audit; retry later")
	case err != nil:
		if ctx.Err() == nil {
			_ = enc.Encode(gin.H{"error": "the export stopped early: " + err.Error()})
		}
	case n == 0:
		start()
	}
}

// joinStatuses lists the statuses a filter may name.
func joinStatuses() string {
	names := make([]string, len(audit.Statuses))
	for i, st := range audit.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
