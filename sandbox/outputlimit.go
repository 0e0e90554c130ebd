package sandbox

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// OutputLimit is the chain link that applies a per-call output limit
// (an app's limits.outputBytes, below the sandbox's own cap): each stream
// of a command passes its first bytes up to the limit, live and in the
// result, then a note of how much was left out. A limit of zero, or at
// or above DefaultOutputLimit, leaves the output alone.
func OutputLimit(limit func(ctx context.Context, call *Call) int64) Middleware {
	return Middleware{Exec: func(next ExecFunc) ExecFunc {
		return func(ctx context.Context, call *Call) (ExecResult, error) {
			n := limit(ctx, call)
			// A long-lived program's output is its conversation with the
			// caller, which limits what it keeps of it.
			if n <= 0 || n >= DefaultOutputLimit || call.Request.LongLived() {
				return next(ctx, call)
			}
			cut := TransformOutput(func(Stream) StreamTransformer { return &headOnly{left: n, limit: n} })
			return cut.Exec(next)(ctx, call)
		}
	}}
}

// headOnly passes the first limit bytes of a stream, cut at a character
// boundary, and says at the end how many it dropped.
type headOnly struct {
	left, limit, dropped int64
}

func (h *headOnly) Transform(p []byte) []byte {
	if h.left <= 0 {
		h.dropped += int64(len(p))
		return nil
	}
	if int64(len(p)) <= h.left {
		h.left -= int64(len(p))
		return p
	}
	k := int(h.left)
	for k > 0 && !utf8.RuneStart(p[k]) {
		k--
	}
	h.dropped += int64(len(p) - k)
	h.left = 0
	return p[:k]
}

func (h *headOnly) Flush() []byte {
	if h.dropped == 0 {
		return nil
	}
	return fmt.Appendf(nil, "\n... [%d bytes left out: the app's policy limits output to %d bytes a stream] ...\n", h.dropped, h.limit)
}
