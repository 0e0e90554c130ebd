package main

import (
	"context"

	"github.com/flowbox/flowbox/sandbox/egress"
)

// egressForward is egress.ForwardCommand, which the agent binary runs too.
func egressForward(ctx context.Context, args []string) (int, error) {
	return egress.ForwardCommand(ctx, args)
}
