package redact

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/flowbox/flowbox/sandbox"
)

// Option configures Middleware.
type Option func(*options)

type options struct {
	files   func(ctx context.Context, call *sandbox.FileCall) *Redactor
	report  func(ctx context.Context, call *sandbox.Call, findings []Finding)
	maxFile int64
}

// WithFiles redacts what file reads and downloads return, with the
// Redactor pick chooses for the operation (nil: none). Text files only: a
// file with a NUL byte in its first 8 KiB is taken for binary and passed
// unchanged, since rewriting it would corrupt it. A download (Open) is
// read whole, up to maxBytes (default 8 MiB; a larger file is refused with
// sandbox.ErrTooLarge), so that its size is that of the redacted text. A
// ZIP archive cannot be redacted as it streams out of the provider, so Zip
// is refused while pick returns a Redactor. A file a block detector
// matches is refused (sandbox.ErrRefused). Listings, stats and writes pass.
func WithFiles(pick func(ctx context.Context, call *sandbox.FileCall) *Redactor, maxBytes int64) Option {
	return func(o *options) {
		o.files = pick
		o.maxFile = maxBytes
	}
}

// WithReport calls report after every command whose output held secrets,
// with what was found (for the audit; never the secrets).
func WithReport(report func(ctx context.Context, call *sandbox.Call, findings []Finding)) Option {
	return func(o *options) { o.report = report }
}

// Middleware redacts the output of every command, live (each chunk the
// caller's OnOutput receives) and final (ExecResult.Stdout and Stderr,
// which equal the concatenated chunks, capped), with the Redactor pick
// chooses for the call; nil leaves the call alone. The command itself
// runs as given: redact Call.Request.Command with Redactor.Redact where it
// is shown or stored.
//
// A long-lived command's output (sandbox.ExecRequest.Stdin: a stdio MCP
// server's messages) is its conversation with the engine, which shows
// nobody the stream and redacts what it passes on (each call's result):
// it is left alone here, where a block would withhold the rest of the
// conversation and hold back every later answer.
func Middleware(pick func(ctx context.Context, call *sandbox.Call) *Redactor, opts ...Option) sandbox.Middleware {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxFile <= 0 {
		o.maxFile = 8 << 20
	}
	mw := sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
			if call.Request.LongLived() {
				return next(ctx, call)
			}
			r := pick(ctx, call)
			if r == nil {
				return next(ctx, call)
			}
			blocked := new(atomic.Bool)
			var ts []*Transformer
			transform := sandbox.TransformOutput(func(sandbox.Stream) sandbox.StreamTransformer {
				t := r.transformer(blocked)
				ts = append(ts, t)
				return t
			})
			res, err := transform.Exec(next)(ctx, call)
			if o.report != nil {
				var f findings
				for _, t := range ts {
					for _, x := range t.Findings() {
						f.merge(x)
					}
				}
				if len(f.list) > 0 {
					o.report(ctx, call, f.list)
				}
			}
			return res, err
		}
	}}
	if o.files != nil {
		mw.File = func(next sandbox.FileFunc) sandbox.FileFunc {
			return func(ctx context.Context, call *sandbox.FileCall) (sandbox.FileResult, error) {
				r := o.files(ctx, call)
				if r == nil {
					return next(ctx, call)
				}
				switch call.Op {
				case sandbox.FileZip:
					return sandbox.FileResult{}, &sandbox.RefusedError{
						Rule:          "redaction",
						Justification: "an archive cannot be redacted, and file redaction is on",
						Hint:          "download the files one at a time",
					}
				case sandbox.FileRead:
					res, err := next(ctx, call)
					if err != nil {
						return res, err
					}
					res.Data, err = redactFile(r, res.Data)
					return res, err
				case sandbox.FileOpen:
					res, err := next(ctx, call)
					if err != nil || res.Reader == nil {
						return res, err
					}
					defer res.Reader.Close()
					if res.Info.Size > o.maxFile {
						return sandbox.FileResult{}, fmt.Errorf("redact %s: %d bytes, over the %d bytes a redacted download may have: %w", call.Path, res.Info.Size, o.maxFile, sandbox.ErrTooLarge)
					}
					data, err := io.ReadAll(io.LimitReader(res.Reader, o.maxFile+1))
					if err != nil {
						return sandbox.FileResult{}, fmt.Errorf("redact %s: read: %w", call.Path, err)
					}
					if int64(len(data)) > o.maxFile {
						return sandbox.FileResult{}, fmt.Errorf("redact %s: over the %d bytes a redacted download may have: %w", call.Path, o.maxFile, sandbox.ErrTooLarge)
					}
					if data, err = redactFile(r, data); err != nil {
						return sandbox.FileResult{}, err
					}
					res.Reader = io.NopCloser(bytes.NewReader(data))
					res.Info.Size = int64(len(data))
					return res, nil
				}
				return next(ctx, call)
			}
		}
	}
	return mw
}

// redactFile redacts a text file's content.
func redactFile(r *Redactor, data []byte) ([]byte, error) {
	if bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0 {
		return data, nil
	}
	out, fs := r.Redact(string(data))
	for _, f := range fs {
		if f.Strategy == Block {
			return nil, &sandbox.RefusedError{Rule: "redaction:" + f.ID, Justification: "the file contains a secret (" + f.ID + ")"}
		}
	}
	if len(fs) == 0 {
		return data, nil
	}
	return []byte(out), nil
}
