package files

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// Processes is the part of sandbox.Manager the processes API uses.
type Processes interface {
	ListProcesses(ctx context.Context, scope sandbox.Scope) ([]sandbox.Process, error)
	ReadProcess(ctx context.Context, scope sandbox.Scope, pid string, offset int64, max int) (sandbox.ProcessOutput, error)
	StopProcess(ctx context.Context, scope sandbox.Scope, pid string) (sandbox.Process, error)
}

// maxProcessRead bounds one read of a process's output.
const maxProcessRead = 64 << 10

// Processes serves POST /api/core/ai/sandbox/processes (L3): a chat's
// background processes, to those who may see its files: "list" them,
// "read" one's output from an offset, "stop" one (as a write: not for a
// share link that shows the files read-only). It starts no sandbox: a
// chat whose sandbox does not run has none.
func (h *Handler) Processes(c *gin.Context) {
	action := ""
	req, scope, ok := h.bindAs(c, func(r fileRequest) string {
		action = r.Action
		if r.Action == "stop" {
			return "write"
		}
		return r.Action
	})
	if !ok {
		return
	}
	if h.Procs == nil {
		api.Error(c, http.StatusNotImplemented, "this engine keeps no background processes")
		return
	}
	ctx := c.Request.Context()
	var out any
	var err error
	switch action {
	case "list":
		var list []sandbox.Process
		if list, err = h.Procs.ListProcesses(ctx, scope); err == nil {
			if list == nil {
				list = []sandbox.Process{}
			}
			out = gin.H{"processes": list}
		}
	case "read", "stop":
		if req.ID == "" {
			api.Error(c, http.StatusBadRequest, fmt.Sprintf("%q needs the process's id", action))
			return
		}
		if req.Offset < 0 {
			api.Error(c, http.StatusBadRequest, "offset must be 0 or more")
			return
		}
		if action == "read" {
			var o sandbox.ProcessOutput
			if o, err = h.Procs.ReadProcess(ctx, scope, req.ID, req.Offset, maxProcessRead); err == nil {
				out = gin.H{"process": o.Process, "offset": o.Offset, "output": string(o.Data), "next": o.Offset + int64(len(o.Data))}
			}
		} else {
			var p sandbox.Process
			if p, err = h.Procs.StopProcess(ctx, scope, req.ID); err == nil {
				out = gin.H{"process": p}
			}
		}
	default:
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("action must be list, read or stop, not %q", action))
		return
	}
	switch {
	case errors.Is(err, sandbox.ErrNoProcess):
		api.Error(c, http.StatusNotFound, err.Error())
	case err != nil:
		if _, known := api.FailureOf(err); !known {
			slog.Error("the chat's background processes", "action", action, "err", err)
		}
		api.Fail(c, err, "the sandbox could not do it")
	default:
		c.JSON(http.StatusOK, out)
	}
}
