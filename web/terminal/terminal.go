// Package terminal serves the chat's web terminal (L1): a WebSocket at
// GET /api/core/ai/sandbox/terminal that carries a terminal in the
// chat's sandbox (sandbox.Terminal) to the browser's xterm.js.
//
// One terminal per chat sandbox: a second page that opens it takes it
// over, and a page that reconnects within Grace returns to the same
// shell with its recent screen replayed. Messages: binary ones are bytes
// (keystrokes in, what the terminal shows out); text ones are JSON,
// {"type":"resize","cols":N,"rows":M} in, {"type":"exit","code":N} and
// {"type":"error","message":...} out.
//
// A replay is the recent output with the sizes it was drawn at:
// {"type":"size","cols":N,"rows":M} before each stretch of it, then
// {"type":"replayed"}. The shell's redraws move the cursor by what the
// screen was when they came, so the page draws each stretch at its size
// and fits its own box after.
//
// Only the chat's owner and admins open it: the command policy cannot
// judge keystrokes. It must never attach a person to another chat's
// terminal.
package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/gin-gonic/gin"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/redact"
	"github.com/flowbox/flowbox/web/api"
)

// Sandboxes is the part of sandbox.Manager the terminal uses.
type Sandboxes interface {
	OpenTerminal(ctx context.Context, scope sandbox.Scope, cols, rows int) (sandbox.Terminal, error)
	Used(ctx context.Context, scope sandbox.Scope)
}

// Record is what the engine keeps of a terminal session (the audit).
type Record struct {
	Scope    sandbox.Scope
	Opener   string // the user who opened it
	Start    time.Time
	End      time.Time
	BytesIn  int64 // keystrokes
	BytesOut int64 // what it showed
	ExitCode int   // -1: hung up
	// Transcript is what the terminal showed, redacted, when the policy
	// asks for one (Truncated: its first policy.MaxTranscript bytes).
	Transcript string
	Truncated  bool
}

// Audit is the session's audit record (kind terminal): who opened it,
// when, for how long, the bytes each way and how its shell ended.
func (r Record) Audit() audit.Record {
	status := audit.StatusSuccess
	if r.ExitCode != 0 {
		status = audit.StatusFailed
	}
	return audit.Record{ID: bson.NewObjectID(), Time: r.Start, DurationMs: r.End.Sub(r.Start).Milliseconds(), Instance: audit.DefaultInstance(),
		Kind: audit.KindTerminal, ActorID: r.Opener, ActorKind: "user", Via: "terminal",
		AppID: r.Scope.AppID, ChatID: r.Scope.ChatID, UserID: r.Scope.UserID, SandboxID: r.Scope.SandboxID(),
		Tool: "terminal", Decision: audit.Allowed, Status: status, ExitCode: r.ExitCode, Bytes: r.BytesIn, StdoutBytes: r.BytesOut,
		Transcript: r.Transcript, Truncated: r.Truncated}
}

// Apps reads an app's setting: its builder may turn terminals off.
type Apps interface {
	Get(ctx context.Context, id string) (apps.App, error)
}

// Transcripts tells whether an app's policy asks for terminal
// transcripts, with the redactor to keep them with (nil: none).
type Transcripts interface {
	TerminalTranscript(ctx context.Context, appID string) *redact.Redactor
}

// Handler serves the terminals.
type Handler struct {
	Sandboxes Sandboxes
	Access    api.ChatAccess
	// Apps, when set, is asked whether the app turned terminals off.
	Apps Apps
	// Transcripts, when set, is asked at each session's start.
	Transcripts Transcripts
	// Off turns terminals off (FLOWBOX_TERMINAL=off).
	Off bool
	// Grace is how long a terminal waits for its page to come back
	// (default 60 s); Kept how much of its latest output is replayed
	// then (default 256 KiB).
	Grace time.Duration
	Kept  int
	// Ended is told of each session's end (the audit); nil: none.
	Ended func(Record)
	Log   *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
}

// session is a terminal and the page attached to it, if any.
type session struct {
	h    *Handler
	rec  Record
	term sandbox.Terminal
	// redactor keeps the transcript, when the policy asks for one.
	redactor   *redact.Redactor
	transcript bytes.Buffer // under mu

	mu     sync.Mutex
	screen []byte
	sizes  []size // what sizes screen was drawn at, from where; the first from 0
	ws     *websocket.Conn
	gen    int // bumped by each attachment
	ended  bool
	timer  *time.Timer
	// sending orders the writes to the page: a replay goes out before
	// the output that follows it. Taken under mu, held for the write.
	sending sync.Mutex
}

func (h *Handler) grace() time.Duration {
	if h.Grace > 0 {
		return h.Grace
	}
	return time.Minute
}

func (h *Handler) kept() int {
	if h.Kept > 0 {
		return h.Kept
	}
	return 256 << 10
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// Serve serves GET /api/core/ai/sandbox/terminal?appId=&chatId=[&userId=]&cols=&rows=.
func (h *Handler) Serve(c *gin.Context) {
	if h.Off {
		api.Error(c, http.StatusForbidden, "terminals are turned off on this engine (FLOWBOX_TERMINAL=off)")
		return
	}
	appID, chatID := c.Query("appId"), c.Query("chatId")
	if appID == "" || chatID == "" {
		api.Error(c, http.StatusBadRequest, "appId and chatId are required")
		return
	}
	cols, _ := strconv.Atoi(c.DefaultQuery("cols", "80"))
	rows, _ := strconv.Atoi(c.DefaultQuery("rows", "24"))
	if cols < 1 || rows < 1 || cols > 1000 || rows > 1000 {
		api.Error(c, http.StatusBadRequest, "cols and rows must be between 1 and 1000")
		return
	}
	p := api.Caller(c)
	user, problem := h.Access.Whose(p, c.Query("userId"), "")
	if problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return
	}
	owner, err := h.Access.ChatOwner(c.Request.Context(), p, appID, user, chatID, true)
	if err == nil && owner != p.UserID && !p.Admin() {
		err = api.ErrNoAccess
	}
	if err != nil {
		if errors.Is(err, api.ErrNoAccess) {
			api.Error(c, http.StatusNotFound, fmt.Sprintf("no chat %q of yours", chatID))
		} else {
			api.Error(c, http.StatusInternalServerError, "could not check access to the chat; retry later")
		}
		return
	}
	if link, ok := api.LinkOf(c); ok && !link.Terminal {
		api.Error(c, http.StatusForbidden, "this share link does not open terminals; its owner may make one that does")
		return
	}
	if h.Apps != nil && !p.Admin() {
		a, err := h.Apps.Get(c.Request.Context(), appID)
		if err != nil {
			api.Error(c, http.StatusInternalServerError, "could not read the app's settings; retry later")
			return
		}
		if a.TerminalOff {
			api.Error(c, http.StatusForbidden, "the app's builder turned terminals off for its chats")
			return
		}
	}
	scope := sandbox.Scope{AppID: appID, UserID: owner, ChatID: chatID}
	// The Origin must be this engine's: another site's page cannot
	// open a terminal with the user's cookie.
	ws, err := websocket.Accept(c.Writer, c.Request, nil)
	if err != nil {
		return // Accept answered
	}
	ws.SetReadLimit(1 << 20)
	s, err := h.session(c.Request.Context(), scope, p.UserID, cols, rows)
	if err != nil {
		msg := "the terminal could not be started; retry later"
		if f, ok := api.FailureOf(err); ok {
			msg = f.Message
		} else {
			h.log().Warn("terminal: start", "sandboxId", scope.SandboxID(), "err", err)
		}
		writeJSON(ws, map[string]any{"type": "error", "message": msg})
		ws.Close(websocket.StatusInternalError, "no terminal")
		return
	}
	s.attach(ws, cols, rows)
}

// session returns the chat's running terminal, or starts one.
func (h *Handler) session(ctx context.Context, scope sandbox.Scope, opener string, cols, rows int) (*session, error) {
	key := scope.SandboxID()
	h.mu.Lock()
	if s, ok := h.sessions[key]; ok {
		h.mu.Unlock()
		return s, nil
	}
	h.mu.Unlock()
	term, err := h.Sandboxes.OpenTerminal(ctx, scope, cols, rows)
	if err != nil {
		return nil, err
	}
	s := &session{h: h, term: term, sizes: []size{{Cols: cols, Rows: rows}}, rec: Record{Scope: scope, Opener: opener, Start: time.Now().UTC(), ExitCode: -1}}
	if h.Transcripts != nil {
		s.redactor = h.Transcripts.TerminalTranscript(ctx, scope.AppID)
	}
	h.mu.Lock()
	if h.sessions == nil {
		h.sessions = map[string]*session{}
	}
	if other, ok := h.sessions[key]; ok {
		// Another page started one meanwhile: use it.
		h.mu.Unlock()
		term.Close()
		return other, nil
	}
	h.sessions[key] = s
	h.mu.Unlock()
	go s.pump()
	return s, nil
}

// pump copies what the terminal shows to the attached page, keeps the
// latest of it for a page that comes back, and counts the terminal as
// the sandbox's use.
func (s *session) pump() {
	used := time.NewTicker(15 * time.Second)
	defer used.Stop()
	out := make(chan []byte, 16)
	go func() {
		defer close(out)
		buf := make([]byte, 32<<10)
		for {
			n, err := s.term.Read(buf)
			if n > 0 {
				out <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	s.h.Sandboxes.Used(context.Background(), s.rec.Scope)
	for {
		select {
		case p, ok := <-out:
			if !ok {
				s.end()
				return
			}
			s.mu.Lock()
			s.rec.BytesOut += int64(len(p))
			if s.redactor != nil {
				keep := min(len(p), policy.MaxTranscript-s.transcript.Len())
				s.transcript.Write(p[:keep])
				s.rec.Truncated = s.rec.Truncated || keep < len(p)
			}
			s.screen = append(s.screen, p...)
			if over := len(s.screen) - s.h.kept(); over > 0 {
				s.screen = append(s.screen[:0], s.screen[over:]...)
				s.sizes = trimSizes(s.sizes, over)
			}
			ws := s.ws
			s.sending.Lock()
			s.mu.Unlock()
			if ws != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = ws.Write(ctx, websocket.MessageBinary, p)
				cancel()
			}
			s.sending.Unlock()
		case <-used.C:
			s.h.Sandboxes.Used(context.Background(), s.rec.Scope)
		}
	}
}

// end closes the session once its terminal ended, and tells the page.
func (s *session) end() {
	s.h.mu.Lock()
	if s.h.sessions[s.rec.Scope.SandboxID()] == s {
		delete(s.h.sessions, s.rec.Scope.SandboxID())
	}
	s.h.mu.Unlock()
	s.mu.Lock()
	s.ended = true
	ws := s.ws
	if s.timer != nil {
		s.timer.Stop()
	}
	rec := s.rec
	rec.End = time.Now().UTC()
	if s.redactor != nil {
		rec.Transcript, _ = s.redactor.Redact(strings.ToValidUTF8(s.transcript.String(), "\uFFFD"))
	}
	if t, ok := s.term.(interface{ ExitCode() int }); ok {
		rec.ExitCode = t.ExitCode()
	}
	s.mu.Unlock()
	s.term.Close()
	if ws != nil {
		writeJSON(ws, map[string]any{"type": "exit", "code": rec.ExitCode})
		ws.Close(websocket.StatusNormalClosure, "the terminal ended")
	}
	if s.h.Ended != nil {
		s.h.Ended(rec)
	}
}

// attach makes ws the session's page, replaying its recent screen, and
// serves its messages until it goes; then the terminal waits Grace for
// a page to come back.
func (s *session) attach(ws *websocket.Conn, cols, rows int) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		writeJSON(ws, map[string]any{"type": "exit", "code": -1})
		ws.Close(websocket.StatusNormalClosure, "the terminal ended")
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	prev := s.ws
	s.ws = ws
	s.gen++
	gen := s.gen
	screen, sizes := append([]byte(nil), s.screen...), slices.Clone(s.sizes)
	s.sending.Lock()
	s.mu.Unlock()
	if len(screen) > 0 {
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for i, z := range sizes {
			end := len(screen)
			if i+1 < len(sizes) {
				end = sizes[i+1].At
			}
			writeJSON(ws, map[string]any{"type": "size", "cols": z.Cols, "rows": z.Rows})
			if part := withoutQueries(screen[z.At:end]); len(part) > 0 {
				_ = ws.Write(wctx, websocket.MessageBinary, part)
			}
		}
		writeJSON(ws, map[string]any{"type": "replayed"})
		cancel()
	}
	s.sending.Unlock()
	ctx := context.Background()
	if prev != nil {
		prev.Close(websocket.StatusPolicyViolation, "the terminal was opened in another page")
	}
	s.resize(cols, rows)
read:
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			break
		}
		switch typ {
		case websocket.MessageBinary:
			if _, err := s.term.Write(data); err != nil {
				break read // the shell is gone: pump ends the session
			}
			s.mu.Lock()
			s.rec.BytesIn += int64(len(data))
			s.mu.Unlock()
		case websocket.MessageText:
			var m struct {
				Type       string
				Cols, Rows int
			}
			if json.Unmarshal(data, &m) == nil && m.Type == "resize" && m.Cols > 0 && m.Rows > 0 && m.Cols <= 1000 && m.Rows <= 1000 {
				s.resize(m.Cols, m.Rows)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.ended {
		return // another page took it, or it ended
	}
	s.ws = nil
	s.timer = time.AfterFunc(s.h.grace(), func() {
		s.mu.Lock()
		stale := s.gen == gen && s.ws == nil
		s.mu.Unlock()
		if stale {
			s.term.Close() // hangs up; pump ends the session
		}
	})
}

// size is a size the terminal had, from offset At of the screen on.
type size struct{ At, Cols, Rows int }

// resize gives the shell the page's size, if it is not the one it has.
// Each resize makes the shell redraw its prompt, moving up as many
// lines as the prompt took at the size before; a needless one can
// erase the lines above it.
func (s *session) resize(cols, rows int) {
	s.mu.Lock()
	last := s.sizes[len(s.sizes)-1]
	same := last.Cols == cols && last.Rows == rows
	if !same {
		z := size{At: len(s.screen), Cols: cols, Rows: rows}
		if last.At == z.At {
			s.sizes[len(s.sizes)-1] = z
		} else {
			s.sizes = append(s.sizes, z)
		}
	}
	s.mu.Unlock()
	if !same {
		_ = s.term.Resize(cols, rows)
	}
}

// trimSizes is sizes once the screen's first n bytes are dropped.
func trimSizes(sizes []size, n int) []size {
	i := 0
	for i+1 < len(sizes) && sizes[i+1].At <= n {
		i++
	}
	out := sizes[:0]
	for _, z := range sizes[i:] {
		z.At = max(z.At-n, 0)
		out = append(out, z)
	}
	return out
}

// withoutQueries is output as a page that comes back draws it, without
// the shell's queries of the terminal (cursor position, status, device
// attributes): the new page would answer them, and the answers would
// reach the shell as typed keys.
func withoutQueries(screen []byte) []byte {
	out := make([]byte, 0, len(screen))
	for len(screen) > 0 {
		i := bytes.Index(screen, []byte("\x1b["))
		if i < 0 {
			break
		}
		out = append(out, screen[:i]...)
		screen = screen[i:]
		if q := terminalQuery(screen); q > 0 {
			screen = screen[q:]
			continue
		}
		out = append(out, screen[:2]...)
		screen = screen[2:]
	}
	return append(out, screen...)
}

// terminalQuery is the length of the query at the start of seq (which
// starts with CSI), or 0 when it is not one: DSR (ESC[5n, ESC[6n,
// ESC[?6n) and DA (ESC[c, ESC[0c, ESC[>c, ESC[>0c, ESC[=c).
func terminalQuery(seq []byte) int {
	for _, q := range []string{"\x1b[5n", "\x1b[6n", "\x1b[?6n", "\x1b[c", "\x1b[0c", "\x1b[>c", "\x1b[>0c", "\x1b[=c"} {
		if bytes.HasPrefix(seq, []byte(q)) {
			return len(q)
		}
	}
	return 0
}

func writeJSON(ws *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ws.Write(ctx, websocket.MessageText, b)
}
