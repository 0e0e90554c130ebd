package api

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/internal/datadisk"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/registry/mcptool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// TestOneErrorTable: every door answers a domain error the same way,
// wrapped or not: the chat's file API, the service API, uploads, the
// admin pages.
func TestOneErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		kind       string
		retryAfter string
	}{
		{&datadisk.LowError{}, http.StatusInsufficientStorage, "insufficient_storage", ""},
		{syscall.ENOSPC, http.StatusInsufficientStorage, "insufficient_storage", ""},
		{registry.ErrNoTool, http.StatusBadRequest, "no_such_tool", ""},
		{&registry.ParamsError{Tool: "shell:exec", Problem: "x"}, http.StatusBadRequest, "bad_params", ""},
		{sandbox.ErrInvalidPath, http.StatusBadRequest, "bad_request", ""},
		{skills.ErrInvalid, http.StatusBadRequest, "bad_request", ""},
		{auth.ErrInvalid, http.StatusBadRequest, "bad_request", ""},
		{sandbox.ErrNotFound, http.StatusNotFound, "not_found", ""},
		{mcptool.ErrNotFound, http.StatusNotFound, "not_found", ""},
		{auth.ErrNotFound, http.StatusNotFound, "not_found", ""},
		{auth.ErrExists, http.StatusConflict, "conflict", ""},
		{sandbox.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large", ""},
		{workspace.ErrQuota, http.StatusRequestEntityTooLarge, "too_large", ""},
		{sandbox.ErrDeleted, http.StatusGone, "gone", ""},
		{policy.NewAskError(policy.Verdict{Decision: policy.Ask, Rule: "ask-rm"}, "rm x"), http.StatusForbidden, "needs_approval", ""},
		{&sandbox.RefusedError{Rule: "no-curl"}, http.StatusForbidden, "refused", ""},
		{sandbox.ErrReadOnly, http.StatusForbidden, "refused", ""},
		{&sandbox.LimitError{}, http.StatusTooManyRequests, "rate_limited", "60"},
		{sandbox.ErrBusy, http.StatusServiceUnavailable, "unavailable", "5"},
		{sandbox.ErrUnavailable, http.StatusServiceUnavailable, "unavailable", "5"},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("open the chat's files: %w", tc.err)} {
			f, ok := FailureOf(err)
			if !ok || f.Status != tc.status || f.Kind != tc.kind || f.RetryAfter != tc.retryAfter || f.Message == "" {
				t.Errorf("%v: %+v (known %v); want %d %s, Retry-After %q and a message", err, f, ok, tc.status, tc.kind, tc.retryAfter)
			}
		}
	}
	if f, ok := FailureOf(errors.New("disk on fire")); ok || f.Status != http.StatusInternalServerError {
		t.Errorf("an unknown error: %+v, %v; want a 500 the caller words", f, ok)
	}
}
