package api

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

// Failure is an error as the API answers it, in its one shape:
// {"code", "statusText", "error": kind, "message"}.
type Failure struct {
	Status        int
	Kind, Message string
	RetryAfter    string
}

func (f Failure) Write(c *gin.Context) {
	if f.RetryAfter != "" {
		c.Header("Retry-After", f.RetryAfter)
	}
	if c.GetBool(openAIErrorsKey) {
		c.AbortWithStatusJSON(f.Status, f.OpenAIBody())
		return
	}
	c.AbortWithStatusJSON(f.Status, f.Body())
}

// openAIErrorsKey marks a route whose errors take OpenAI's shape.
const openAIErrorsKey = "flowbox.openaiErrors"

// OpenAIErrors marks the route's errors for OpenAI's clients: put first
// on the route, so that the authentication middleware's refusals take the
// shape too.
func OpenAIErrors(c *gin.Context) { c.Set(openAIErrorsKey, true) }

// OpenAIBody is the failure as OpenAI's API answers one, which its SDKs
// show in full: {"error":{"message","type","code"}}, with the one error
// shape's code, statusText and message beside it (error is the object
// there, its code the kind).
func (f Failure) OpenAIBody() gin.H {
	return gin.H{"error": gin.H{"message": f.Message, "type": openAIType(f.Status), "code": f.Kind},
		"code": f.Status, "statusText": http.StatusText(f.Status), "message": f.Message}
}

// openAIType is OpenAI's error type for a status.
func openAIType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}

// Body is the failure in the one error shape.
func (f Failure) Body() gin.H {
	return gin.H{"code": f.Status, "statusText": http.StatusText(f.Status), "error": f.Kind, "message": f.Message}
}

// Error writes an error the handler decided itself, of the kind its
// status says.
func Error(c *gin.Context, status int, msg string) {
	Failure{Status: status, Kind: ErrorKind(status), Message: msg}.Write(c)
}

// ServiceError writes an error with a kind a program can switch on.
func ServiceError(c *gin.Context, status int, kind, msg string) {
	Failure{Status: status, Kind: kind, Message: msg}.Write(c)
}

// ErrorKind is the kind of an error answer by its status alone.
func ErrorKind(status int) string {
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

// FailureOf is the one table from the domain's errors to the API's
// answers: the status, the kind and what the caller reads. ok is false
// for an error the table does not know: the caller answers 500 with what
// it was doing.
func FailureOf(err error) (f Failure, ok bool) {
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
	with := func(status int, kind, msg string) (Failure, bool) {
		if msg == "" {
			msg = err.Error()
		}
		return Failure{Status: status, Kind: kind, Message: msg}, true
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
		f.RetryAfter = "60"
		return f, true
	case is(sandbox.ErrBusy):
		f, _ := with(http.StatusServiceUnavailable, "unavailable", "the sandbox is being stopped or repaired; retry in a few seconds")
		f.RetryAfter = "5"
		return f, true
	case is(sandbox.ErrUnavailable):
		f, _ := with(http.StatusServiceUnavailable, "unavailable", sandbox.ErrUnavailable.Error())
		f.RetryAfter = "5"
		return f, true
	}
	return Failure{Status: http.StatusInternalServerError, Kind: "internal"}, false
}

// Fail answers err by the table; an error it does not know is a 500 that
// says what could not be done (doing: "the sandbox could not do it").
func Fail(c *gin.Context, err error, doing string) {
	f, ok := FailureOf(err)
	if !ok {
		f.Message = doing + "; retry later"
	}
	f.Write(c)
}

// DecodeJSON reads one JSON value and refuses trailing data.
func DecodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
