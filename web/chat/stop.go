package chat

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/files"
)

// ErrStopped is the cause of a run's cancellation when someone stopped it
// (E3).
var ErrStopped = errors.New("stopped by the user")

// What the chat's history keeps after the part of the answer given
// before a run ended early.
const (
	stoppedLine     = "Stopped by the user."
	interruptedLine = "Interrupted: the connection closed before the answer was complete."
)

// Stops knows the chat runs in progress, so that a stop request can end
// one (E3). Each run registers its chat in Redis under this process's id,
// renewed while it goes on; a stop request answered by another process
// publishes the chat on a channel every process listens to, and the one
// running it cancels it. Without Redis (nil, or down) a stop still
// reaches the runs of the process that answers it. A nil *Stops tracks
// nothing.
type Stops struct {
	// Redis shares the runs between engine processes; nil: this process
	// only.
	Redis redis.UniversalClient
	// Namespace keeps two databases that share one Redis apart.
	Namespace string
	// Lease is how long a run's entry outlives its last renewal; default
	// 1 minute.
	Lease time.Duration
	Log   *slog.Logger

	once    sync.Once
	process string
	mu      sync.Mutex
	runs    map[string]map[*int]context.CancelCauseFunc
}

func (s *Stops) init() {
	s.once.Do(func() {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.process = hex.EncodeToString(b[:])
		s.runs = map[string]map[*int]context.CancelCauseFunc{}
		if s.Lease <= 0 {
			s.Lease = time.Minute
		}
		if s.Log == nil {
			s.Log = slog.Default()
		}
	})
}

// runKey names a chat's runs; the hash keeps user ids of any characters
// out of Redis keys and messages.
func runKey(scope sandbox.Scope) string {
	h := sha256.Sum256([]byte(scope.AppID + "\x00" + scope.UserID + "\x00" + scope.ChatID))
	return hex.EncodeToString(h[:16])
}

func (s *Stops) channel() string       { return "flowbox:stops:{" + s.Namespace + "}" }
func (s *Stops) key(run string) string { return "flowbox:stops:{" + s.Namespace + "}:" + run }

// endScript removes a run's entry only while it names this process: a
// later run of the chat elsewhere keeps its own.
var endScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// Track registers a run of the chat: ctx is cancelled with ErrStopped
// when someone stops it. done must be called when the run ends.
func (s *Stops) Track(ctx context.Context, scope sandbox.Scope) (_ context.Context, done func()) {
	if s == nil {
		return ctx, func() {}
	}
	s.init()
	ctx, cancel := context.WithCancelCause(ctx)
	run, token := runKey(scope), new(int)
	s.mu.Lock()
	if s.runs[run] == nil {
		s.runs[run] = map[*int]context.CancelCauseFunc{}
	}
	s.runs[run][token] = cancel
	s.mu.Unlock()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	if s.Redis != nil {
		key := s.key(run)
		wg.Go(func() {
			tick := time.NewTicker(s.Lease / 3)
			defer tick.Stop()
			for {
				rctx, c := context.WithTimeout(context.Background(), 5*time.Second)
				err := s.Redis.Set(rctx, key, s.process, s.Lease).Err()
				c()
				if err != nil {
					s.Log.Warn("chat run not registered in Redis; only this engine process can stop it", "chatId", scope.ChatID, "err", err)
				}
				select {
				case <-stop:
					rctx, c := context.WithTimeout(context.Background(), 5*time.Second)
					_ = endScript.Run(rctx, s.Redis, []string{key}, s.process).Err()
					c()
					return
				case <-tick.C:
				}
			}
		})
	}
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.runs[run], token)
			if len(s.runs[run]) == 0 {
				delete(s.runs, run)
			}
			s.mu.Unlock()
			close(stop)
			wg.Wait()
			cancel(nil)
		})
	}
}

// cancelLocal cancels this process's runs of a chat and says whether
// there were any.
func (s *Stops) cancelLocal(run string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.runs[run] {
		cancel(ErrStopped)
	}
	return len(s.runs[run]) > 0
}

// Stop cancels the chat's runs in progress, in whichever process runs
// them, and says whether there was one.
func (s *Stops) Stop(ctx context.Context, scope sandbox.Scope) (bool, error) {
	if s == nil {
		return false, nil
	}
	s.init()
	run := runKey(scope)
	stopped := s.cancelLocal(run)
	if s.Redis == nil {
		return stopped, nil
	}
	owner, err := s.Redis.Get(ctx, s.key(run)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return stopped, nil
	case err != nil:
		if stopped {
			return true, nil
		}
		return false, err
	case owner == s.process:
		return stopped, nil
	}
	if err := s.Redis.Publish(ctx, s.channel(), run).Err(); err != nil && !stopped {
		return false, err
	}
	return true, nil
}

// Listen cancels this process's runs that other processes were asked to
// stop, until ctx ends. The Redis client resubscribes after an outage.
func (s *Stops) Listen(ctx context.Context) {
	if s == nil || s.Redis == nil {
		return
	}
	s.init()
	sub := s.Redis.Subscribe(ctx, s.channel())
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			s.cancelLocal(m.Payload)
		}
	}
}

// stopRequest is the body of POST /api/v1/chat/stop.
type stopRequest struct {
	AppID     string `json:"appId"`
	ChatID    string `json:"chatId"`
	CustomUID string `json:"customUid"`
}

// Stop serves POST /api/v1/chat/stop (E3): it ends the caller's run of a
// chat in progress. The chat is the caller's own, found as Completions
// finds it, so a chat of anyone else is one the caller does not have.
func (h *Handler) Stop(c *gin.Context) {
	if !h.authorised(c) {
		return
	}
	var body stopRequest
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10), &body); err != nil || body.ChatID == "" {
		api.Error(c, http.StatusBadRequest, `send {"appId": "...", "chatId": "..."} naming the chat whose run to stop`)
		return
	}
	if problem := files.ChatIDProblem(body.ChatID); problem != "" {
		api.Error(c, http.StatusBadRequest, "chatId: "+problem)
		return
	}
	scope, ok := h.callerChat(c, body.AppID, body.ChatID, body.CustomUID)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	stopped, err := h.Stops.Stop(ctx, scope)
	if err != nil {
		h.Log.Warn("stop chat run", "chatId", scope.ChatID, "err", err)
		api.Error(c, http.StatusServiceUnavailable, "could not reach the engine process running the chat; retry in a moment")
		return
	}
	if !stopped {
		// Idle, or not the caller's: a chat of someone else's is
		// answered as one that does not exist.
		chat, err := h.History.Open(ctx, scope)
		if err != nil {
			api.Error(c, http.StatusInternalServerError, "could not read the chat; retry later")
			return
		}
		if chat.CreatedAt.IsZero() {
			api.Error(c, http.StatusNotFound, "no chat "+strconv.Quote(scope.ChatID))
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"stopped": stopped})
}

// callerChat is the scope of the chat chatID of app appID that the
// caller names: a share link's visitor's, an app key's end user's
// (customUID), an account's own, or the service key's end user's; false
// when it answered the client (no such app for the caller).
func (h *Handler) callerChat(c *gin.Context, appID, chatID, customUID string) (sandbox.Scope, bool) {
	t := &turn{req: chatRequest{AppID: appID, ChatID: chatID, CustomUID: customUID}}
	if t.req.AppID == "" {
		t.req.AppID = h.DefaultApp
	}
	if t.req.CustomUID == "" {
		t.req.CustomUID = "api"
	}
	if !h.resolveCaller(c, t) {
		return sandbox.Scope{}, false
	}
	app, err := h.Apps.Get(c.Request.Context(), t.req.AppID)
	if err == nil && t.signedIn && h.Access != nil && !h.Access.CanUseApp(api.Caller(c), app) {
		err = apps.ErrNotFound
	}
	if errors.Is(err, apps.ErrNotFound) {
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(t.req.AppID))
		return sandbox.Scope{}, false
	} else if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not read the app; retry later")
		return sandbox.Scope{}, false
	}
	return sandbox.Scope{AppID: app.ID, UserID: t.req.CustomUID, ChatID: t.req.ChatID}, true
}

// endedEarly ends a run that ended with runErr: a stopped run's client
// reads the stop's line and the stream's end, a paused run's the error.
// It returns the answer the history keeps: what was answered, then the
// stop's line or why the run was interrupted.
func (h *Handler) endedEarly(ctx context.Context, out *chatStream, res *nodes.Result, runErr error) string {
	line := "Interrupted: " + runErr.Error()
	stopped := errors.Is(context.Cause(ctx), ErrStopped)
	switch {
	case stopped:
		line = stoppedLine
	case errors.Is(runErr, context.Canceled):
		line = interruptedLine
	}
	answer := line
	if a := strings.TrimRight(res.Answer, "\n "); a != "" {
		answer = a + "\n\n" + line
	}
	switch {
	case stopped:
		out.event(nodes.Event{Data: nodes.AnswerDelta{Text: "\n\n" + line}})
		if out.stream && out.detail {
			out.send("stopped", map[string]any{"message": line})
		}
		out.finish(&nodes.Result{Answer: answer, Responses: res.Responses})
	case res.Paused != nil:
		out.event(nodes.Event{Data: nodes.NodeError{Message: runErr.Error()}})
		out.finish(&nodes.Result{Answer: answer, Responses: res.Responses})
	}
	return answer
}

// Running says whether a run of the chat is in progress, in this engine
// process or, through Redis, in another.
func (s *Stops) Running(ctx context.Context, scope sandbox.Scope) (bool, error) {
	if s == nil {
		return false, nil
	}
	s.init()
	run := runKey(scope)
	s.mu.Lock()
	local := len(s.runs[run]) > 0
	s.mu.Unlock()
	if local || s.Redis == nil {
		return local, nil
	}
	n, err := s.Redis.Exists(ctx, s.key(run)).Result()
	return n > 0, err
}
