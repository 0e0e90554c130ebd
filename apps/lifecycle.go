package apps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
)

// Lifecycle gives the sandbox manager an app's startup and shutdown
// commands (P4), from the inputs startupCommands and shutdownCommands of
// the tool-call nodes of the graph its chats run (the published version's,
// else the draft's), in the graph's order.
type Lifecycle struct{ Apps *Store }

var _ sandbox.Lifecycle = Lifecycle{}

func (l Lifecycle) StartupCommands(ctx context.Context, scope sandbox.Scope) ([]string, error) {
	return l.commands(ctx, scope.AppID, "startupCommands")
}

func (l Lifecycle) ShutdownCommands(ctx context.Context, scope sandbox.Scope) ([]string, error) {
	return l.commands(ctx, scope.AppID, "shutdownCommands")
}

func (l Lifecycle) commands(ctx context.Context, appID, input string) ([]string, error) {
	a, err := l.Apps.Get(ctx, appID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // the app is gone; its sandboxes are on their way out
	} else if err != nil {
		return nil, fmt.Errorf("read app %s: %w", appID, err)
	}
	g, _, err := l.Apps.Running(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("read app %s's published version: %w", appID, err)
	}
	var all []string
	for _, n := range g.Nodes {
		raw, ok := n.Inputs[input]
		if n.Type != "tools" || !ok {
			continue
		}
		var cmds []string
		if err := json.Unmarshal(raw, &cmds); err != nil {
			return nil, fmt.Errorf("app %s, node %s: %s is not a list of commands: %w", appID, n.NodeID, input, err)
		}
		all = append(all, cmds...)
	}
	return all, nil
}

// OwnerOf is the account that owns an app, for the owner caps; "" for
// an app that is gone (sandbox.Owners.AppOwner).
func (s *Store) OwnerOf(ctx context.Context, appID string) (string, error) {
	a, err := s.Get(ctx, appID)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return a.OwnerID, err
}
