package audit

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// Recorder receives the records (Writer).
type Recorder interface {
	Write(ctx context.Context, r Record)
}

// Config configures the middleware. Zero values have the documented
// defaults.
type Config struct {
	// Records receives every record (required).
	Records Recorder
	// Redact rewrites what a record keeps of the caller's text (the
	// command, a path, an error's text) before it is stored, so that a
	// secret in a command is not kept in the audit; nil keeps it as is.
	Redact func(string) string
	// Instance names this engine process in the records; default
	// "<hostname>:<pid>".
	Instance string
	// Metrics counts the commands by result; nil: NewMetrics(),
	// registered nowhere.
	Metrics *Metrics
	// OnRecord, when set, sees every record as it is made, on the call's
	// path (an alert hook): it must be quick and must not retain it
	// beyond the call.
	OnRecord func(Record)
	// Now dates the records; default time.Now.
	Now func() time.Time
}

// Middleware returns the link of the sandbox chain that records every
// command and file operation, to be the outermost, so that it sees what
// the caller asked and what the caller got, refusals of the links below
// included. It changes nothing of the call or its result.
func Middleware(cfg Config) sandbox.Middleware {
	if cfg.Records == nil {
		panic("audit.Middleware: Config.Records is required")
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	if cfg.Instance == "" {
		cfg.Instance = DefaultInstance()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return sandbox.Middleware{Exec: cfg.exec, File: cfg.file}
}

// DefaultInstance is "<hostname>:<pid>".
func DefaultInstance() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func (cfg Config) base(kind Kind, actor sandbox.Actor, scope sandbox.Scope, sandboxID string, start time.Time) Record {
	return Record{
		Time: start, Instance: cfg.Instance, Kind: kind,
		ActorID: actor.UserID, ActorKind: string(actor.Kind), ToolCallID: actor.ToolCallID, Via: actor.Via,
		AppID: scope.AppID, ChatID: scope.ChatID, UserID: scope.UserID, SandboxID: sandboxID,
	}
}

func (cfg Config) exec(next sandbox.ExecFunc) sandbox.ExecFunc {
	return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
		// What the caller asked, before the links below rewrite it.
		rec := cfg.base(KindCommand, call.Request.Actor, call.Scope, call.SandboxID, cfg.Now())
		rec.Tool, rec.Op = tool(call.Request.Actor), call.Request.Actor.Op
		if call.Hook != "" {
			// An app's startup or shutdown command (sandbox.Lifecycle).
			rec.Tool = call.Hook
		}
		rec.Command = cfg.Redact(call.Request.Command)
		began := time.Now()
		if call.Request.LongLived() {
			// It may run for hours: its start is recorded once it runs
			// (its first output), its end as any command's.
			sink, started := call.Request.OnOutput, false
			call.Request.OnOutput = func(s sandbox.Stream, p []byte) {
				if !started {
					started = true
					start := rec
					start.Decision, start.Status = Allowed, StatusStarted
					if call.Request.Approved != "" && call.Request.Approved == call.Request.Command {
						start.Decision = Approved
					}
					cfg.emit(ctx, start)
				}
				if sink != nil {
					sink(s, p)
				}
			}
		}

		res, err := next(ctx, call)

		rec.DurationMs = time.Since(began).Milliseconds()
		rec.Decision, rec.Rule, rec.Reason, rec.Status = classify(res, err, ctx.Err())
		if rec.Decision == Allowed && call.Request.Approved != "" && call.Request.Approved == call.Request.Command {
			rec.Decision = Approved
		}
		rec.Reason = cfg.Redact(rec.Reason)
		rec.ExitCode = res.ExitCode
		rec.StdoutBytes, rec.StderrBytes = int64(len(res.Stdout)), int64(len(res.Stderr))
		rec.Truncated, rec.TimedOut = res.Truncated, res.TimedOut
		rec.OOMKilled, rec.PidsLimited = res.OOMKilled, res.PidsLimited
		if err != nil {
			rec.Error = cfg.Redact(err.Error())
		}
		cfg.Metrics.commands.WithLabelValues(result(rec.Status)).Inc()
		if rec.OOMKilled {
			cfg.Metrics.oomKills.Inc()
		}
		if rec.PidsLimited {
			cfg.Metrics.pidsLimitHits.Inc()
		}
		cfg.emit(ctx, rec)
		return res, err
	}
}

func (cfg Config) file(next sandbox.FileFunc) sandbox.FileFunc {
	return func(ctx context.Context, call *sandbox.FileCall) (sandbox.FileResult, error) {
		rec := cfg.base(KindFile, call.Actor, call.Scope, call.SandboxID, cfg.Now())
		rec.Tool = tool(call.Actor)
		rec.Op, rec.Path = string(call.Op), cfg.Redact(call.Path)
		var zipped *countingWriter
		if call.Op == sandbox.FileZip && call.Writer != nil {
			zipped = &countingWriter{w: call.Writer}
			call.Writer = zipped
			defer func() { call.Writer = zipped.w }()
		}
		began := time.Now()

		r, err := next(ctx, call)

		rec.DurationMs = time.Since(began).Milliseconds()
		rec.Decision, rec.Rule, rec.Reason, rec.Status = classify(sandbox.ExecResult{}, err, ctx.Err())
		rec.Reason = cfg.Redact(rec.Reason)
		switch {
		case call.Op == sandbox.FileWrite:
			rec.Bytes = int64(len(call.Data))
		case call.Op == sandbox.FileRead:
			rec.Bytes = int64(len(r.Data))
		case call.Op == sandbox.FileOpen:
			rec.Bytes = r.Info.Size
		case zipped != nil:
			rec.Bytes = zipped.n
		}
		if err != nil {
			rec.Error = cfg.Redact(err.Error())
		}
		cfg.emit(ctx, rec)
		return r, err
	}
}

func (cfg Config) emit(ctx context.Context, rec Record) {
	if cfg.OnRecord != nil {
		cfg.OnRecord(rec)
	}
	cfg.Records.Write(context.WithoutCancel(ctx), rec)
}

// tool names what made the call: the model's shell tool, or the kind of
// actor (files, admin, service), "unknown" when the caller did not say.
func tool(a sandbox.Actor) string {
	if a.Tool != "" {
		return a.Tool
	}
	switch a.Kind {
	case sandbox.ActorAgent:
		return "sandbox_shell"
	case sandbox.ActorUnknown:
		return "unknown"
	}
	return string(a.Kind)
}

// countingWriter counts what a zip wrote.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
