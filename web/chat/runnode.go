package chat

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/web/api"
)

// runNodeBody is a request to run one node by itself.
type runNodeBody struct {
	// Inputs are values typed by the builder, by input key; they take the
	// place of the node's own.
	Inputs map[string]any `json:"inputs"`
	// Question is what the start gives, as a chat's message would.
	Question  string         `json:"question"`
	Variables map[string]any `json:"variables"`
}

// RunNode runs one node of the app's saved graph by itself with inputs
// the builder typed (W4), for the app's owner and admins. It answers the
// node's run record and what it said; a command it runs uses a sandbox of
// the builder's own debug chat of the app.
func (h *Handler) RunNode(c *gin.Context) {
	ctx := c.Request.Context()
	app, err := h.Apps.Get(ctx, c.Param("appId"))
	if err != nil || !h.Access.CanUseApp(api.Caller(c), app) {
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(c.Param("appId")))
		return
	}
	if !h.Access.CanEditApp(api.Caller(c), app) {
		api.Error(c, http.StatusForbidden, "only the app's owner and admins may run its nodes by themselves")
		return
	}
	var body runNodeBody
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, maxChatBody), &body); err != nil {
		api.Error(c, http.StatusBadRequest, "the request body is not a node run: "+err.Error())
		return
	}
	p, _ := api.PrincipalOf(c)
	chat := nodes.Chat{AppID: app.ID, UserID: p.UserID, ChatID: "debug-node", Question: body.Question,
		Variables: body.Variables, Via: via(p, true, share.Link{}, false)}
	run, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var answer strings.Builder
	resp, err := h.Engine.RunNode(run, &app.Graph, c.Param("nodeId"), body.Inputs, chat, func(ev nodes.Event) {
		if d, ok := ev.Data.(nodes.AnswerDelta); ok {
			answer.WriteString(d.Text)
		}
	})
	switch {
	case errors.Is(err, nodes.ErrInvalid):
		api.Error(c, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil && ctx.Err() != nil:
		return // the client went away
	case err != nil:
		api.Error(c, http.StatusBadRequest, err.Error())
		return
	}
	text := answer.String()
	if h.Redactor != nil {
		r := h.Redactor(ctx, app.ID)
		text = redactText(r, text)
		res := &nodes.Result{Responses: []nodes.NodeResponse{resp}}
		redactResult(r, res)
	}
	c.JSON(http.StatusOK, gin.H{"response": resp, "answer": text})
}
