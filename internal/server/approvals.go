package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/flowbox/flowbox/nodes/history"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// chatToolCalls counts the tool calls of a chat's stored turns, for the
// per-chat limit. A call that paused for approval counts once: in the
// turn that answered it; a call the limits refused does not count.
func chatToolCalls(chats *history.Store) func(ctx context.Context, chat sandbox.Scope) (int, error) {
	return func(ctx context.Context, scope sandbox.Scope) (int, error) {
		chat, err := chats.Get(ctx, scope)
		if errors.Is(err, history.ErrNotFound) {
			return 0, nil
		} else if err != nil {
			return 0, err
		}
		items, err := chats.Items(ctx, chat, 0, 1<<20)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, it := range items {
			var calls []toolcall.Call
			_ = json.Unmarshal(it.ToolCalls, &calls)
			for _, c := range calls {
				if c.Status != registry.StatusAwaiting && c.Status != registry.StatusLimited {
					n++
				}
			}
		}
		return n, nil
	}
}
