package sandbox

import (
	"context"
	"errors"
	"fmt"
)

// Cleanup is a stack of undo steps a provider builds while it makes a
// sandbox (or adopts one), run in reverse order when a later step fails,
// so that a failed Ensure leaves nothing behind.
type Cleanup struct {
	steps []cleanupStep
}

type cleanupStep struct {
	name string
	fn   func(context.Context) error
}

// Add pushes a step; name says what it undoes, in its error.
func (c *Cleanup) Add(name string, fn func(context.Context) error) {
	c.steps = append(c.steps, cleanupStep{name, fn})
}

// Run runs every step, last first, whatever fails, joins the errors and
// empties the stack.
func (c *Cleanup) Run(ctx context.Context) error {
	var errs []error
	for i := len(c.steps) - 1; i >= 0; i-- {
		if err := c.steps[i].fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.steps[i].name, err))
		}
	}
	c.steps = nil
	return errors.Join(errs...)
}

// Forget empties the stack without running it: what was made is kept.
func (c *Cleanup) Forget() { c.steps = nil }
