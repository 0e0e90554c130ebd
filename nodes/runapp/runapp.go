// Package runapp is the app-call node (type "runApp", FastGPT's): it runs
// another app with a question and a history, and gives the app's answer
// and the history with the new turn. The app runs its published version
// (its draft when it has none, as its chats do), or the version the node
// pins, on the engine the node is installed in.
//
// The called app runs inside the calling chat: its commands run in the
// chat's sandbox, under the chat's command policy and audit, and its
// answer and tool cards stream into the chat's answer as FastGPT's do
// (unless the node's system_forbid_stream is on). It must never run an
// app the calling app's owner may not use, nest apps deeper than
// MaxDepth, or let nested runs together run more nodes than one turn may.
package runapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
)

// MaxDepth is how deep apps run one another: the chat's app runs at depth
// 0, an app it calls at 1, and so on up to MaxDepth.
const MaxDepth = 3

// Apps reads apps and their versions (apps.Store).
type Apps interface {
	Get(ctx context.Context, id string) (apps.App, error)
	Version(ctx context.Context, appID, versionID string) (apps.Version, error)
}

// Config configures the node type.
type Config struct {
	Apps Apps
	// Engine runs the called apps: the engine the node is installed in.
	Engine *nodes.Engine
	// Access says whether the owner of the calling app may use the called
	// one (the rules of the chat API: their own apps, public ones, all of
	// them for admins), and whether they may edit it, which lets the run's
	// details show the called app's nodes.
	Access func(ctx context.Context, caller, called apps.App) (use, edit bool, err error)
}

// Node is the app-call node type.
type Node struct{ cfg Config }

var _ nodes.NodeType = (*Node)(nil)

// New returns the node type.
func New(cfg Config) *Node { return &Node{cfg: cfg} }

// Detail is what a run of the node keeps in its response (FastGPT's
// names): the app it ran, which version ("" for the draft), the question
// and answer and, when the calling app's owner may edit the called app,
// the called app's node responses.
type Detail struct {
	AppID      string               `json:"appId"`
	AppName    string               `json:"appName"`
	VersionID  string               `json:"versionId"`
	Query      string               `json:"query"`
	TextOutput string               `json:"textOutput"`
	Responses  []nodes.NodeResponse `json:"pluginDetail,omitempty"`
}

// nesting is what a run of a called app knows of the runs around it.
type nesting struct {
	depth  int
	caller string // the app running at this depth
	budget *budget
}

type nestingKey struct{}

// budget is the node runs the apps called in one turn (see Turn), and
// every app they call in turn, may still make together. It is bounded
// like one turn (nodes.Engine.MaxNodeRuns); the calling chat's own nodes
// count against the engine's bound apart from it.
type budget struct {
	mu    sync.Mutex
	left  int
	limit int
}

func newBudget(e *nodes.Engine) *budget {
	limit := e.MaxNodeRuns
	if limit <= 0 {
		limit = nodes.DefaultMaxNodeRuns
	}
	return &budget{left: limit, limit: limit}
}

// Turn returns the context for running one turn of a chat on e: the apps
// its nodes call, and those they call, share one bound on their node runs,
// e's MaxNodeRuns. Without it, each app call of the chat's app has a
// bound of its own.
func Turn(ctx context.Context, e *nodes.Engine) context.Context {
	return context.WithValue(ctx, nestingKey{}, nesting{budget: newBudget(e)})
}

// take counts one node run; false when none is left.
func (b *budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

func (b *budget) remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left
}

func (b *budget) spent() string {
	return fmt.Sprintf("the apps this app calls ran %d nodes in this turn, the most they may run together: an app may call others in a loop, or they are too big", b.limit)
}

// Run runs the called app and answers with its answer.
func (n *Node) Run(ctx context.Context, run *nodes.NodeRun) (map[string]any, error) {
	at, _ := ctx.Value(nestingKey{}).(nesting)
	if at.caller == "" {
		at.caller = run.Chat.AppID
	}
	if at.depth >= MaxDepth {
		return nil, fmt.Errorf("apps may call one another at most %d deep, and this call would go deeper; call the app from a shallower one, or check that apps do not call each other in a circle", MaxDepth)
	}
	appID := appInput(run.Inputs["app"])
	if appID == "" {
		return nil, errors.New("no app to run: choose one in the node's app input")
	}
	question := nodes.StringInput(run.Inputs, "userChatInput")
	if strings.TrimSpace(question) == "" {
		return nil, errors.New("the question for the app is empty: give the node's userChatInput a text, or a reference to one")
	}
	caller, err := n.cfg.Apps.Get(ctx, at.caller)
	if err != nil {
		return nil, fmt.Errorf("read the calling app %s: %w", at.caller, err)
	}
	called, err := n.cfg.Apps.Get(ctx, appID)
	var use, edit bool
	if err == nil {
		use, edit, err = n.cfg.Access(ctx, caller, called)
	}
	if errors.Is(err, apps.ErrNotFound) || (err == nil && !use) {
		return nil, fmt.Errorf("no app %q that this app's owner may use: choose one of theirs, or a public one", appID)
	} else if err != nil {
		return nil, fmt.Errorf("read app %s: %w", appID, err)
	}
	graph, versionID, err := n.graph(ctx, called, nodes.StringInput(run.Inputs, "version"))
	if err != nil {
		return nil, err
	}

	b := at.budget
	if b == nil {
		b = newBudget(n.cfg.Engine)
	}
	left := b.remaining()
	if left <= 0 {
		return nil, errors.New(b.spent())
	}
	eng := *n.cfg.Engine
	eng.MaxNodeRuns = left
	inner, cancel := context.WithCancel(context.WithValue(ctx, nestingKey{}, nesting{depth: at.depth + 1, caller: called.ID, budget: b}))
	defer cancel()

	history := historyInput(run.Inputs["history"], run.Chat.History)
	chat := nodes.Chat{AppID: run.Chat.AppID, UserID: run.Chat.UserID, ChatID: run.Chat.ChatID, Question: question,
		History: history, Via: run.Chat.Via}
	quiet := nodes.BoolInput(run.Inputs, "system_forbid_stream")
	spent := false
	emit := func(ev nodes.Event) {
		switch d := ev.Data.(type) {
		case nodes.NodeStatus:
			if d.Status == nodes.StatusRunning && !b.take() && !spent {
				spent = true
				cancel()
			}
		case nodes.AnswerDelta, nodes.ToolCallStarted, nodes.ToolParams, nodes.ToolOutput, nodes.ToolResult:
			if !quiet {
				run.Emit(ev.Data)
			}
		}
	}
	res, err := eng.Run(inner, &graph, chat, emit)
	detail := Detail{AppID: called.ID, AppName: called.Name, VersionID: versionID, Query: question}
	if res != nil {
		detail.TextOutput = res.Answer
		if edit {
			detail.Responses = res.Responses
		}
	}
	run.Detail = detail
	switch {
	case spent, res != nil && res.Failed != "" && b.remaining() <= 0:
		// The called app reached the bound its engine was given: what
		// was left of the budget.
		return nil, errors.New(b.spent())
	case errors.Is(err, nodes.ErrInvalid):
		return nil, fmt.Errorf("app %s cannot run: %w", called.Name, err)
	case err != nil:
		return nil, err
	case res.Paused != nil:
		return nil, fmt.Errorf("app %s stopped to wait for a person's approval of a command, which an app called by another cannot do: have its policy allow or forbid the command", called.Name)
	case res.Failed != "":
		return nil, fmt.Errorf("app %s: %s", called.Name, res.Failed)
	}
	turns := make([]any, 0, len(history)+2)
	for _, m := range history {
		turns = append(turns, map[string]any{"role": m.Role, "content": m.Content})
	}
	turns = append(turns, map[string]any{"role": llm.RoleUser, "content": question}, map[string]any{"role": llm.RoleAssistant, "content": res.Answer})
	return map[string]any{"answerText": res.Answer, "history": turns}, nil
}

// graph is what the called app runs: the pinned version, else its
// published one, else its draft.
func (n *Node) graph(ctx context.Context, a apps.App, pinned string) (nodes.Graph, string, error) {
	id := pinned
	if id == "" {
		id = a.PublishedVersionID
	}
	if id == "" {
		return a.Graph, "", nil
	}
	v, err := n.cfg.Apps.Version(ctx, a.ID, id)
	if errors.Is(err, apps.ErrVersionNotFound) {
		return nodes.Graph{}, "", fmt.Errorf("app %s has no version %q: choose one of its versions, or leave the version empty for the published one", a.Name, id)
	} else if err != nil {
		return nodes.Graph{}, "", fmt.Errorf("read app %s's version %s: %w", a.ID, id, err)
	}
	return *v.Graph, v.ID, nil
}

// appInput is the app id an input names: the id itself, or FastGPT's
// selected app {"id": ...}.
func appInput(v any) string {
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v)
	case map[string]any:
		id, _ := v["id"].(string)
		return strings.TrimSpace(id)
	}
	return ""
}

// historyInput is the history the called app sees: the chat's last n
// messages, or the messages given ({"role", "content"} each, as the
// histories variable and this node's history output hold them).
func historyInput(v any, chat []llm.Message) []llm.Message {
	switch v := v.(type) {
	case float64:
		n := min(max(int(v), 0), len(chat))
		return append([]llm.Message(nil), chat[len(chat)-n:]...)
	case []any:
		var out []llm.Message
		for _, item := range v {
			m, _ := item.(map[string]any)
			role, _ := m["role"].(string)
			content, _ := m["content"].(string)
			if role == llm.RoleUser || role == llm.RoleAssistant || role == llm.RoleSystem {
				out = append(out, llm.Message{Role: role, Content: content})
			}
		}
		return out
	}
	return nil
}
