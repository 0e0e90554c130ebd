package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The kinds of error the API answers, for errors.Is. An *Error is each
// of them whose kind it has.
var (
	ErrBadRequest    = errors.New("flowbox: bad request")
	ErrNoSuchTool    = errors.New("flowbox: no such tool")
	ErrBadParams     = errors.New("flowbox: bad params")
	ErrUnauthorized  = errors.New("flowbox: unauthorized")
	ErrForbidden     = errors.New("flowbox: forbidden")
	ErrRefused       = errors.New("flowbox: refused by the policy")
	ErrNeedsApproval = errors.New("flowbox: needs a person's approval")
	ErrNotFound      = errors.New("flowbox: not found")
	ErrGone          = errors.New("flowbox: gone")
	ErrTooLarge      = errors.New("flowbox: too large")
	ErrRateLimited   = errors.New("flowbox: rate limited")
	ErrUnavailable   = errors.New("flowbox: unavailable")
	ErrInternal      = errors.New("flowbox: internal error")
	// Snapshots': a name taken, a session with no files yet, an engine
	// that keeps no snapshots.
	ErrExists      = errors.New("flowbox: exists already")
	ErrNotStarted  = errors.New("flowbox: not started")
	ErrUnsupported = errors.New("flowbox: unsupported by this engine")
)

// kinds maps the API's error kinds to their sentinels.
var kinds = map[string]error{
	"bad_request":    ErrBadRequest,
	"no_such_tool":   ErrNoSuchTool,
	"bad_params":     ErrBadParams,
	"unauthorized":   ErrUnauthorized,
	"forbidden":      ErrForbidden,
	"refused":        ErrRefused,
	"needs_approval": ErrNeedsApproval,
	"not_found":      ErrNotFound,
	"gone":           ErrGone,
	"too_large":      ErrTooLarge,
	"rate_limited":   ErrRateLimited,
	"unavailable":    ErrUnavailable,
	"internal":       ErrInternal,
	"exists":         ErrExists,
	"not_started":    ErrNotStarted,
	"unsupported":    ErrUnsupported,
}

// statusKinds is the kind an answer without the API's error shape (a
// proxy's 502, say) is given from its status.
var statusKinds = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusGone:                  "gone",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusTooManyRequests:       "rate_limited",
	http.StatusBadGateway:            "unavailable",
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusGatewayTimeout:        "unavailable",
	http.StatusInternalServerError:   "internal",
}

// Error is an error the API answered.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Kind is the API's stable kind (not_found, rate_limited, ...); for
	// an answer that is not the API's error shape, the kind its status
	// stands for, or "" when none does.
	Kind string
	// Message says what happened and what to do.
	Message string
	// RetryAfter is the wait the answer's Retry-After header asked for.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = http.StatusText(e.Status)
	}
	if e.Message == "" {
		return fmt.Sprintf("flowbox: %d %s", e.Status, kind)
	}
	return fmt.Sprintf("flowbox: %d %s: %s", e.Status, kind, e.Message)
}

// Is makes errors.Is(err, ErrNotFound) and the like true for an *Error
// of that kind.
func (e *Error) Is(target error) bool {
	s, ok := kinds[e.Kind]
	return ok && s == target
}

// wireError is the API's one error shape.
type wireError struct {
	Code    int    `json:"code"`
	Kind    string `json:"error"`
	Message string `json:"message"`
}

// maxErrorBody bounds what is read of an error answer: the API's are
// small, and a proxy's page need not be read whole.
const maxErrorBody = 64 << 10

// readError reads and closes an answer that is not a success.
func readError(resp *http.Response) *Error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var w wireError
	if json.Unmarshal(body, &w) == nil && (w.Kind != "" || w.Message != "") {
		e.Kind, e.Message = w.Kind, w.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
	}
	if e.Kind == "" {
		e.Kind = statusKinds[e.Status]
	}
	return e
}

// fromWire is an error event of a stream.
func fromWire(w wireError) *Error {
	e := &Error{Status: w.Code, Kind: w.Kind, Message: w.Message}
	if e.Kind == "" {
		e.Kind = statusKinds[e.Status]
	}
	return e
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
