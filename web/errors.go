package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/internal/datadisk"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/registry/mcptool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// apiFailure is an error as the API answers it, in its one shape:
// {"code", "statusText", "error": kind, "message"}.
type apiFailure struct {
	status     int
	kind, msg  string
	retryAfter string
}

func (f apiFailure) write(c *gin.Context) {
	if f.retryAfter != "" {
		c.Header("Retry-After", f.retryAfter)
	}
	c.AbortWithStatusJSON(f.status, f.body())
}

// body is the failure in the one error shape.
func (f apiFailure) body() gin.H {
	return gin.H{"code": f.status, "statusText": http.StatusText(f.status), "error": f.kind, "message": f.msg}
}

// apiError writes an error the handler decided itself, of the kind its
// status says.
func apiError(c *gin.Context, status int, msg string) {
	apiFailure{status: status, kind: errorKind(status), msg: msg}.write(c)
}

// serviceError writes an error with a kind a program can switch on.
func serviceError(c *gin.Context, status int, kind, msg string) {
	apiFailure{status: status, kind: kind, msg: msg}.write(c)
}

// errorKind is the kind of an error answer by its status alone.
func errorKind(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusGone:
		return "gone"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnprocessableEntity:
		return "unprocessable"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusInsufficientStorage:
		return "insufficient_storage"
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return "unavailable"
	}
	return "internal"
}

// failureOf is the one table from the domain's errors to the API's
// answers: the status, the kind and what the caller reads. ok is false
// for an error the table does not know: the caller answers 500 with what
// it was doing.
func failureOf(err error) (f apiFailure, ok bool) {
	var (
		low     *datadisk.LowError
		bad     *registry.ParamsError
		ask     *policy.AskError
		refused *sandbox.RefusedError
		limit   *sandbox.LimitError
	)
	is := func(targets ...error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
	with := func(status int, kind, msg string) (apiFailure, bool) {
		if msg == "" {
			msg = err.Error()
		}
		return apiFailure{status: status, kind: kind, msg: msg}, true
	}
	switch {
	// Space: the data disk low, or a full filesystem (the chat's disk,
	// the sandbox's disk limit).
	case errors.As(err, &low):
		return with(http.StatusInsufficientStorage, "insufficient_storage", "")
	case is(syscall.ENOSPC, syscall.EDQUOT):
		return with(http.StatusInsufficientStorage, "insufficient_storage", "no space left for this file: the chat's files or the "+
			"sandbox's disk are at their limit; delete files it no longer needs and try again")
	// The caller's mistakes.
	case is(registry.ErrNoTool):
		return with(http.StatusBadRequest, "no_such_tool", err.Error()+"; GET /api/sandbox/v1/tools lists the tools")
	case errors.As(err, &bad):
		return with(http.StatusBadRequest, "bad_params", bad.Error())
	case is(sandbox.ErrInvalidPath, skills.ErrInvalid, skills.ErrInvalidPath, mcptool.ErrInvalid, auth.ErrInvalid):
		return with(http.StatusBadRequest, "bad_request", "")
	case is(sandbox.ErrNotFound, skills.ErrNotFound, mcptool.ErrNotFound):
		return with(http.StatusNotFound, "not_found", "")
	case is(auth.ErrNotFound):
		return with(http.StatusNotFound, "not_found", "no such user or key")
	case is(mcptool.ErrExists):
		return with(http.StatusConflict, "conflict", "")
	case is(auth.ErrExists):
		return with(http.StatusConflict, "conflict", "that user name is taken; choose another")
	case is(sandbox.ErrTooLarge, skills.ErrTooLarge, workspace.ErrQuota):
		return with(http.StatusRequestEntityTooLarge, "too_large", "")
	case is(sandbox.ErrDeleted):
		return with(http.StatusGone, "gone", "this chat or session was deleted, and its sandbox and files with it")
	// The policy's answers.
	case errors.As(err, &ask):
		return with(http.StatusForbidden, "needs_approval", fmt.Sprintf("the policy's rule %s asks a person to approve this, "+
			"which cannot be done here: run it from a chat, or ask the operator to change the rule", ask.Verdict.Rule))
	case errors.As(err, &refused), is(sandbox.ErrRefused, sandbox.ErrReadOnly):
		return with(http.StatusForbidden, "refused", "")
	// Caps and the sandbox service.
	case errors.As(err, &limit):
		f, _ := with(http.StatusTooManyRequests, "rate_limited", limit.Error())
		f.retryAfter = "60"
		return f, true
	case is(sandbox.ErrBusy):
		f, _ := with(http.StatusServiceUnavailable, "unavailable", "the sandbox is being stopped or repaired; retry in a few seconds")
		f.retryAfter = "5"
		return f, true
	case is(sandbox.ErrUnavailable):
		f, _ := with(http.StatusServiceUnavailable, "unavailable", sandbox.ErrUnavailable.Error())
		f.retryAfter = "5"
		return f, true
	}
	return apiFailure{status: http.StatusInternalServerError, kind: "internal"}, false
}

// fail answers err by the table; an error it does not know is a 500 that
// says what could not be done (doing: "the sandbox could not do it").
func fail(c *gin.Context, err error, doing string) {
	f, ok := failureOf(err)
	if !ok {
		f.msg = doing + "; retry later"
	}
	f.write(c)
}

// decodeJSON reads one JSON value and refuses trailing data.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
