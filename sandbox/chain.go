package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// ActorKind says through which door a call reached the manager.
type ActorKind string

const (
	// ActorUnknown is the zero value: the caller did not say who it is.
	// Policies must not take it for any of the kinds below.
	ActorUnknown ActorKind = ""
	// ActorAgent: the model, through a tool call (Actor.ToolCallID).
	ActorAgent ActorKind = "agent"
	// ActorFiles: a person through the file API (list, read, write,
	// download).
	ActorFiles ActorKind = "files"
	// ActorAdmin: an operator acting on a sandbox as such (admin UI or
	// command line), whoever owns it.
	ActorAdmin ActorKind = "admin"
	// ActorService: a program without a person behind it (probes,
	// external tools, the engine's own steps).
	ActorService ActorKind = "service"
)

// Actor is who makes a call. It may differ from the owner the Scope
// names: an app owner or an admin browsing a user's files acts on that
// user's sandbox under their own UserID.
type Actor struct {
	// UserID is the account the call is made by (for the agent: the user
	// whose chat it runs in). Empty when there is none.
	UserID string    `json:"userId,omitempty"`
	Kind   ActorKind `json:"kind,omitempty"`
	// ToolCallID is the id of the model's tool call, for ActorAgent.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Via names the credential the call came through, for the audit: an
	// API key's id or a share link's id. Empty for a session.
	Via string `json:"via,omitempty"`
	// Tool names the agent's tool that made the command when it is not
	// sandbox_shell (a skill's script, an exec tool, an MCP server's
	// tool), and Op the operation the audit files it under (an exec
	// tool's auditOperation); both for the audit only.
	Tool string `json:"tool,omitempty"`
	Op   string `json:"op,omitempty"`
}

// Call is one command on its way through the chain. Its Request carries
// the caller's Actor and the live output sink (OnOutput).
type Call struct {
	Scope     Scope
	SandboxID string
	Request   ExecRequest
	// Hook is HookStartup or HookShutdown for an app's lifecycle
	// commands (see Lifecycle), empty for every other call. Such a call
	// runs in the sandbox as it is: the manager neither starts nor
	// refreshes it.
	Hook string
}

// ExecFunc runs a call.
type ExecFunc func(ctx context.Context, call *Call) (ExecResult, error)

// FileOp names a file operation.
type FileOp string

// The operations of Files.
const (
	FileList  FileOp = "list"
	FileStat  FileOp = "stat"
	FileRead  FileOp = "read"  // Files.ReadFile
	FileOpen  FileOp = "open"  // Files.Open, for streaming
	FileWrite FileOp = "write" // Files.WriteFile
	FileZip   FileOp = "zip"
)

// FileCall is one file operation on its way through the chain.
type FileCall struct {
	Actor     Actor
	Scope     Scope
	SandboxID string
	Op        FileOp
	// Path is as the caller gave it; WorkspaceRel gives its canonical
	// form (and refuses it when it leaves /workspace).
	Path string
	// Data is the content of a write. A hook may replace it.
	Data []byte
	// Max bounds a read, in bytes (<= 0: no bound).
	Max int64
	// Writer receives the archive of a zip. A hook may wrap it.
	Writer io.Writer

	files *lazyFiles
}

// FileResult is what a file operation produced; only its operation's
// fields are set.
type FileResult struct {
	Entries []FileInfo // list
	Info    FileInfo   // stat, open
	Data    []byte     // read
	// Reader streams an opened file; the caller closes it. A hook that
	// fails an open after calling next closes it.
	Reader io.ReadCloser
}

// FileFunc runs a file operation.
type FileFunc func(ctx context.Context, call *FileCall) (FileResult, error)

// Middleware is one link of the manager's chain, which every command
// (Manager.Exec) and every file operation (the Files of Manager.Files)
// goes through before it reaches the provider: a command filter, output
// redaction and an audit record plug in here. Either hook may be nil.
// Config.Middleware lists the links outermost first, for both hooks.
//
// A hook may refuse a call (return an error, or for Exec a result, without
// calling next), change it before next (call.Request, call.Data,
// call.Writer), and rewrite or record what next returned.
//
// Live output. call.Request.OnOutput is the sink of the command's live
// output (nil when the caller wants none). An Exec hook that sees or
// rewrites live output replaces it before calling next with a function
// that passes what it lets out to the sink it replaced. The chain
// guarantees that the sink a hook installs is called one chunk at a time,
// never concurrently, and never once next has returned; the sink it
// replaced is not called after the hook returns. So a hook may hold bytes
// back (a redactor holds what could be the start of a secret), one buffer
// per Stream, and when next returns, pass what it held on to the sink it
// replaced, before it returns: not later, and not from another goroutine.
// Neither sink may retain p. TransformOutput does all of this for a
// transform of the bytes, and rewrites the final result the same way.
type Middleware struct {
	Exec func(next ExecFunc) ExecFunc
	File func(next FileFunc) FileFunc
}

// outputGate passes live output to one sink, one chunk at a time, until
// it is closed; after that, nothing.
type outputGate struct {
	mu     sync.Mutex
	sink   func(Stream, []byte)
	closed bool
}

func (g *outputGate) write(s Stream, p []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed && len(p) > 0 {
		g.sink(s, p)
	}
}

func (g *outputGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// sealOutput runs next with the call's output sink behind a gate that
// serialises it and closes when next returns. The chain seals every link
// and the core: whatever a link below does, a sink is never called
// concurrently or after the link that installed it saw next return, and
// the caller's sink never after Exec returned.
func sealOutput(next ExecFunc) ExecFunc {
	return func(ctx context.Context, call *Call) (ExecResult, error) {
		sink := call.Request.OnOutput
		if sink == nil {
			return next(ctx, call)
		}
		g := &outputGate{sink: sink}
		call.Request.OnOutput = g.write
		defer func() {
			g.close()
			call.Request.OnOutput = sink
		}()
		return next(ctx, call)
	}
}

// StreamTransformer rewrites one output stream of one command. Transform
// gets the next chunk and returns what may be let out now: it may hold
// back bytes the next chunk could complete, such as the start of a secret.
// Flush returns what is still held when the stream ends. Neither may
// retain p; what they return is used before the next call.
type StreamTransformer interface {
	Transform(p []byte) []byte
	Flush() []byte
}

// TransformFunc is a StreamTransformer that holds nothing back, for
// transforms that need no context across chunks. Chunks are cut anywhere,
// a multi-byte character included.
type TransformFunc func(p []byte) []byte

func (f TransformFunc) Transform(p []byte) []byte { return f(p) }
func (f TransformFunc) Flush() []byte             { return nil }

// TransformOutput returns middleware that rewrites the output of every
// command, live and final, with a transformer newT makes for each stream
// of each command. Live output reaches the sink above transformed, with
// what the transformer held back flushed when the command ends, before
// Exec returns. The final ExecResult's Stdout and Stderr are the
// transformed stream, capped as providers cap output, so that a cut never
// splits what the transform had to see whole; text the stream did not
// carry (the note on a timeout, the message of a failure, or all of it
// when the provider does not stream) is transformed on its own.
func TransformOutput(newT func(Stream) StreamTransformer) Middleware {
	return Middleware{Exec: func(next ExecFunc) ExecFunc {
		return func(ctx context.Context, call *Call) (ExecResult, error) {
			streams := [2]transformedStream{{s: Stdout}, {s: Stderr}}
			for i := range streams {
				streams[i].t = newT(streams[i].s)
				streams[i].raw.init(DefaultOutputLimit)
				streams[i].out.init(DefaultOutputLimit)
			}
			down := call.Request.OnOutput
			call.Request.OnOutput = func(s Stream, p []byte) {
				i := 0
				if s == Stderr {
					i = 1
				}
				if out := streams[i].write(p); len(out) > 0 && down != nil {
					down(s, out)
				}
			}
			res, err := next(ctx, call)
			call.Request.OnOutput = down
			for i := range streams {
				if out := streams[i].flush(); len(out) > 0 && down != nil {
					down(streams[i].s, out)
				}
			}
			var cut [2]bool
			res.Stdout, cut[0] = streams[0].result(res.Stdout, newT)
			res.Stderr, cut[1] = streams[1].result(res.Stderr, newT)
			res.Truncated = res.Truncated || cut[0] || cut[1]
			return res, err
		}
	}}
}

// transformedStream keeps, capped, what a stream carried before and after
// the transform.
type transformedStream struct {
	s        Stream
	t        StreamTransformer
	raw, out capBuffer
}

func (ts *transformedStream) write(p []byte) []byte {
	ts.raw.write(p)
	out := ts.t.Transform(p)
	ts.out.write(out)
	return out
}

func (ts *transformedStream) flush() []byte {
	out := ts.t.Flush()
	ts.out.write(out)
	return out
}

// result is the transformed form of final, what the layers below
// returned for this stream, and whether the transformed stream was cut.
// When final begins with what the stream carried (as capped by a
// Collector), that part is replaced by the transformed stream.
func (ts *transformedStream) result(final string, newT func(Stream) StreamTransformer) (string, bool) {
	if ts.raw.total > 0 {
		if rest, ok := strings.CutPrefix(final, ts.raw.String()); ok {
			return ts.out.String() + transformString(newT(ts.s), rest), ts.out.truncated()
		}
	}
	return transformString(newT(ts.s), final), false
}

func transformString(t StreamTransformer, s string) string {
	if s == "" {
		return ""
	}
	out := string(t.Transform([]byte(s)))
	return validUTF8(out + string(t.Flush()))
}

// lazyFiles is the provider's Files of one sandbox, created or woken by
// the first operation that passes the chain, so that a refused operation
// creates nothing.
type lazyFiles struct {
	m     *Manager
	scope Scope
	mu    sync.Mutex
	files Files
}

func (l *lazyFiles) get(ctx context.Context) (Files, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files != nil {
		return l.files, nil
	}
	id, err := l.m.Ensure(ctx, l.scope)
	if err != nil {
		return nil, err
	}
	// Opening the files of a chat that had no sandbox creates it: its
	// startup commands run first (a failure is only logged here).
	l.m.startup(ctx, l.scope, id)
	f, err := l.m.cfg.Provider.Files(ctx, id)
	if err != nil {
		return nil, err
	}
	l.files = f
	return f, nil
}

// fileCore is the end of the file chain: the provider's operation.
func (m *Manager) fileCore(ctx context.Context, call *FileCall) (FileResult, error) {
	if call.files == nil {
		return FileResult{}, errors.New("sandbox files: a file call reached the provider without the sandbox it came for")
	}
	if mt, ok, err := m.mountFor(ctx, call.Scope, call.Path); err != nil {
		return FileResult{}, err
	} else if ok {
		return mountFile(ctx, mt, call)
	}
	files, err := call.files.get(ctx)
	if err != nil {
		return FileResult{}, err
	}
	var r FileResult
	switch call.Op {
	case FileList:
		r.Entries, err = files.List(ctx, call.Path)
		if err == nil {
			r.Entries = m.withMounts(ctx, call.Scope, call.Path, r.Entries)
		}
	case FileStat:
		r.Info, err = files.Stat(ctx, call.Path)
	case FileRead:
		r.Data, err = files.ReadFile(ctx, call.Path, call.Max)
	case FileOpen:
		r.Reader, r.Info, err = files.Open(ctx, call.Path)
	case FileWrite:
		err = files.WriteFile(ctx, call.Path, call.Data)
	case FileZip:
		err = m.zip(ctx, call.Scope, files, call.Path, call.Writer)
	default:
		err = fmt.Errorf("file operation %q: %w", call.Op, ErrUnsupported)
	}
	return r, err
}

// chainFiles is the Files the manager hands out: every operation goes
// through the chain's file hooks.
type chainFiles struct {
	m     *Manager
	actor Actor
	files *lazyFiles
}

var _ Files = (*chainFiles)(nil)

func (f *chainFiles) do(ctx context.Context, call FileCall) (FileResult, error) {
	call.Actor, call.Scope, call.SandboxID, call.files = f.actor, f.files.scope, f.files.scope.SandboxID(), f.files
	return f.m.file(ctx, &call)
}

func (f *chainFiles) List(ctx context.Context, path string) ([]FileInfo, error) {
	r, err := f.do(ctx, FileCall{Op: FileList, Path: path})
	if err != nil {
		return nil, err
	}
	return r.Entries, nil
}

func (f *chainFiles) Stat(ctx context.Context, path string) (FileInfo, error) {
	r, err := f.do(ctx, FileCall{Op: FileStat, Path: path})
	if err != nil {
		return FileInfo{}, err
	}
	return r.Info, nil
}

func (f *chainFiles) Open(ctx context.Context, path string) (io.ReadCloser, FileInfo, error) {
	r, err := f.do(ctx, FileCall{Op: FileOpen, Path: path})
	if err != nil {
		if r.Reader != nil {
			r.Reader.Close()
		}
		return nil, FileInfo{}, err
	}
	if r.Reader == nil {
		return nil, FileInfo{}, fmt.Errorf("open %s: the file chain returned no reader", path)
	}
	return r.Reader, r.Info, nil
}

func (f *chainFiles) ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	r, err := f.do(ctx, FileCall{Op: FileRead, Path: path, Max: max})
	if err != nil {
		return nil, err
	}
	return r.Data, nil
}

func (f *chainFiles) WriteFile(ctx context.Context, path string, data []byte) error {
	_, err := f.do(ctx, FileCall{Op: FileWrite, Path: path, Data: data})
	return err
}

func (f *chainFiles) Zip(ctx context.Context, path string, w io.Writer) error {
	_, err := f.do(ctx, FileCall{Op: FileZip, Path: path, Writer: w})
	return err
}
