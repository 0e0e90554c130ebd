// Package registry is the one list of tools a sandbox offers (A3): the
// shell, the workspace's files, the skills, the operator's exec tools and
// the admins' MCP servers, each under a resource-prefixed name
// ("shell:exec", "file:read", "skill:run", "exec:weather",
// "mcp:docs/search") with its JSON Schema and metadata, and the name a
// model calls it by ("sandbox_shell", "execute_skill_script"). The
// tool-call node and the sandbox service API (and its MCP server) both
// run tools from it, so a tool is defined once and reaches both.
//
// The shell, file and skill backends are here; the exec tools' and the
// MCP servers' are in registry/exectool and registry/mcptool. Guard is
// what a call that passes no sandbox chain meets instead: the app's
// command policy, its redaction and the audit.
//
// Tools come from backends. A backend owns one resource prefix and may
// hook into the lifecycle: Warmup and Shutdown for what it shares among
// every session (a connection, a catalog), Initialize and Cleanup for
// what belongs to one session (its sandbox). The registry calls every
// backend's hook in order and reports their errors together.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/schemas"
)

// Tool is one tool of the registry.
type Tool struct {
	// Name is resource-prefixed: "shell:exec", "mcp:docs/search".
	Name string
	// ModelName is what a model calls it (^[a-zA-Z0-9_-]{1,64}$); empty:
	// PlainName(Name).
	ModelName   string
	Description string
	// InputSchema is a JSON Schema of an object: what Call.Params must be.
	InputSchema json.RawMessage
	// ReadOnly tools change nothing; Destructive ones may destroy data;
	// ConcurrencySafe ones may run beside other calls of one round.
	ReadOnly, Destructive, ConcurrencySafe bool
	// ReadParams, when set, checks params the tool's own way instead of
	// against InputSchema: leniently, taking what it can from broken JSON
	// (models send it) and clamping what it may. It answers a
	// *ParamsError when it cannot read them.
	ReadParams func(params json.RawMessage) error
	// Example is a call's params as a caller should write them, shown
	// with a *ParamsError.
	Example string
	// Fail, when set, is the result a caller that must answer something
	// (a model) reads for an error that stopped the call: a command
	// tool's refusal reads like a command's failure (N5). nil:
	// Result{Text: err.Error(), IsError: true}.
	Fail func(err error) Result
	// Run runs one call; params have been checked (Check).
	Run func(ctx context.Context, call Call) (Result, error)
}

// Failed is the result a model reads for an error that stopped a call
// of the tool.
func (t Tool) Failed(err error) Result {
	if t.Fail != nil {
		return t.Fail(err)
	}
	return Result{Text: err.Error(), IsError: true, Status: StatusFailed}
}

// Call is one call of a tool in a session (a chat's sandbox, or a
// service API session).
type Call struct {
	Scope  sandbox.Scope
	Actor  sandbox.Actor
	Params json.RawMessage
	// Approved is the command line a person approved, for a tool whose
	// command an ask rule stopped (sandbox.ExecRequest.Approved).
	Approved string
	// Edited is the command line a person wrote instead of the one the
	// params make (P10): a command tool runs it as it is, approved.
	Edited string
	// ApprovedInChat, when set, says whether a person approved a command
	// line for the whole chat (P10): it then runs without asking again.
	ApprovedInChat func(ctx context.Context, command string) bool
	// Skills are the skills the caller may use (a node's chosen ones);
	// nil: every installed skill.
	Skills []string
	// OnOutput receives live output; may be nil.
	OnOutput func(s sandbox.Stream, p []byte)
}

// Result is what a call gave.
type Result struct {
	// Text is what a model reads.
	Text string
	// Output is the structured result the service API answers; nil
	// answers {"text": Text}.
	Output any
	// IsError: the tool ran and failed (a command's exit code, a tool's
	// error result). It is a result, not an error: callers never retry it.
	IsError bool
	// Status is the chat card's: success, failed or timed out (empty:
	// from IsError, see Of).
	Status Status
}

// ErrNoTool: no tool of that name for this caller.
var ErrNoTool = errors.New("no such tool")

// ParamsError: the params do not match the tool's input schema; nothing
// ran.
type ParamsError struct {
	Tool    string
	Problem string
	// Example is the tool's Example, when it has one.
	Example string
}

func (e *ParamsError) Error() string {
	msg := fmt.Sprintf("the params of %s do not match its input schema, nothing was run: %s", e.Tool, e.Problem)
	if e.Example != "" {
		msg += "; call it like " + e.Example
	}
	return msg
}

// Backend gives the tools of one resource.
type Backend interface {
	// Prefix is the resource the backend's tools are named under
	// ("shell", "mcp"); its tools' names start with Prefix + ":".
	Prefix() string
	// Tools lists the backend's tools for a session's scope.
	Tools(ctx context.Context, scope sandbox.Scope) ([]Tool, error)
}

// Finder finds one tool by name without listing every tool (a backend
// whose listing is costly: every MCP server). ErrNoTool when there is
// none.
type Finder interface {
	Find(ctx context.Context, scope sandbox.Scope, name string) (Tool, error)
}

// Expander gives the tools a group name stands for ("mcp:{serverId}":
// every tool of a server), or the one tool a full name names.
type Expander interface {
	Expand(ctx context.Context, scope sandbox.Scope, name string) ([]Tool, error)
}

// Lifecycle hooks a backend may have (A3).
type (
	// Warmer prepares what the backend shares among sessions, at engine
	// start or when asked.
	Warmer interface {
		Warmup(ctx context.Context) error
	}
	// Initializer prepares one session's resources when it is created
	// with a start (its sandbox).
	Initializer interface {
		Initialize(ctx context.Context, scope sandbox.Scope) error
	}
	// Cleaner releases one session's resources when it is destroyed.
	Cleaner interface {
		Cleanup(ctx context.Context, scope sandbox.Scope) error
	}
	// Shutdowner releases what the backend shares, at engine stop.
	Shutdowner interface {
		Shutdown(ctx context.Context) error
	}
)

// Registry is the engine's tools, from its backends.
type Registry struct {
	// Before, when set, judges every call before it runs (the app's
	// policy on destructive tools): an error it returns is the call's.
	Before func(ctx context.Context, t Tool, call Call) error

	backends []Backend
	// Aliases are bare names resolved to a backend ("weather" for an exec
	// tool "exec:weather"): resolved by Lookup when no backend owns a
	// prefix-less name.
	bare Backend
}

// New returns a registry of the backends, in the order their tools are
// listed. bare, when set, resolves names without a prefix (the exec
// tools' declared names).
func New(bare Backend, backends ...Backend) *Registry {
	return &Registry{backends: backends, bare: bare}
}

// List returns every tool a session's scope may call, in the backends'
// order. A backend that fails leaves its tools out; its error is joined
// to the others' and the rest is returned.
func (r *Registry) List(ctx context.Context, scope sandbox.Scope) ([]Tool, error) {
	var out []Tool
	var errs []error
	for _, b := range r.backends {
		tools, err := b.Tools(ctx, scope)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s tools: %w", b.Prefix(), err))
		}
		out = append(out, tools...)
	}
	return out, errors.Join(errs...)
}

// Lookup finds a tool by name: prefixed ("file:read") or, for the bare
// backend, its bare name. ErrNoTool when there is none.
func (r *Registry) Lookup(ctx context.Context, scope sandbox.Scope, name string) (Tool, error) {
	b, name, err := r.backend(name)
	if err != nil {
		return Tool{}, err
	}
	if f, ok := b.(Finder); ok {
		return f.Find(ctx, scope, name)
	}
	tools, err := b.Tools(ctx, scope)
	if err != nil {
		return Tool{}, err
	}
	for _, t := range tools {
		if t.Name == name {
			return t, nil
		}
	}
	return Tool{}, fmt.Errorf("%w %q", ErrNoTool, name)
}

// Expand gives the tools a name stands for: a group ("mcp:{serverId}")
// where its backend has groups, else the one tool Lookup finds.
func (r *Registry) Expand(ctx context.Context, scope sandbox.Scope, name string) ([]Tool, error) {
	b, full, err := r.backend(name)
	if err != nil {
		return nil, err
	}
	if x, ok := b.(Expander); ok {
		return x.Expand(ctx, scope, full)
	}
	t, err := r.Lookup(ctx, scope, name)
	if err != nil {
		return nil, err
	}
	return []Tool{t}, nil
}

// backend is the backend that owns a name, and the name with its prefix.
func (r *Registry) backend(name string) (Backend, string, error) {
	prefix, _, ok := strings.Cut(name, ":")
	if ok {
		i := slices.IndexFunc(r.backends, func(b Backend) bool { return b.Prefix() == prefix })
		if i < 0 {
			return nil, "", fmt.Errorf("%w %q: no tools are named %s:... here", ErrNoTool, name, prefix)
		}
		return r.backends[i], name, nil
	}
	if r.bare != nil && name != "" {
		return r.bare, r.bare.Prefix() + ":" + name, nil
	}
	return nil, "", fmt.Errorf("%w %q: tool names have a resource prefix, e.g. shell:exec", ErrNoTool, name)
}

// Execute checks the params against the tool's schema and runs it.
func (r *Registry) Execute(ctx context.Context, t Tool, call Call) (Result, error) {
	call.Params = Params(call.Params)
	if err := t.Check(call.Params); err != nil {
		return Result{}, err
	}
	if r.Before != nil {
		if err := r.Before(ctx, t, call); err != nil {
			return Result{}, err
		}
	}
	return t.Run(ctx, call)
}

// Params is a call's params as tools read them: none (absent, empty or
// null) is the empty object.
func Params(p json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(p); len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	return p
}

// Check reports, as a *ParamsError, params that do not match the tool's
// input schema, or that its ReadParams cannot read. A schema that cannot
// be compiled (an MCP server's odd one) checks only that params are a
// JSON object.
func (t *Tool) Check(params json.RawMessage) error {
	if t.ReadParams != nil {
		return t.ReadParams(params)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &ParamsError{Tool: t.Name, Problem: "they are not JSON (" + err.Error() + ")", Example: t.Example}
	}
	if _, ok := doc.(map[string]any); !ok {
		return &ParamsError{Tool: t.Name, Problem: "they must be a JSON object", Example: t.Example}
	}
	schema := compiled(t.InputSchema)
	if schema == nil {
		return nil
	}
	if err := schema.Validate(doc); err != nil {
		return &ParamsError{Tool: t.Name, Problem: schemas.Problems(err), Example: t.Example}
	}
	return nil
}

// schemas caches compiled input schemas by their text: tools are listed
// anew for every call, their schemas seldom change.
var compiledSchemas sync.Map // string → *jsonschema.Schema (nil: does not compile)

// compiled is a schema compiled, or nil when it does not compile.
func compiled(raw json.RawMessage) *jsonschema.Schema {
	if len(raw) == 0 {
		return nil
	}
	if s, ok := compiledSchemas.Load(string(raw)); ok {
		return s.(*jsonschema.Schema)
	}
	var schema *jsonschema.Schema
	if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err == nil {
		c := jsonschema.NewCompiler()
		if c.AddResource("tool.json", doc) == nil {
			schema, _ = c.Compile("tool.json")
		}
	}
	compiledSchemas.Store(string(raw), schema)
	return schema
}

// PlainName is a tool's name with every character a model or an MCP
// client would refuse (":", "/") written as "_": "shell:exec" is
// "shell_exec".
func PlainName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Model is the name a model calls the tool by.
func (t Tool) Model() string {
	if t.ModelName != "" {
		return t.ModelName
	}
	return PlainName(t.Name)
}

// Warmup runs every backend's Warmup.
func (r *Registry) Warmup(ctx context.Context) error {
	var errs []error
	for _, b := range r.backends {
		if w, ok := b.(Warmer); ok {
			if err := w.Warmup(ctx); err != nil {
				errs = append(errs, fmt.Errorf("warm up %s: %w", b.Prefix(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Initialize runs every backend's Initialize for a new session; the first
// failure stops it.
func (r *Registry) Initialize(ctx context.Context, scope sandbox.Scope) error {
	for _, b := range r.backends {
		if in, ok := b.(Initializer); ok {
			if err := in.Initialize(ctx, scope); err != nil {
				return err
			}
		}
	}
	return nil
}

// Cleanup runs every backend's Cleanup for a session being destroyed,
// all of them whatever fails.
func (r *Registry) Cleanup(ctx context.Context, scope sandbox.Scope) error {
	var errs []error
	for _, b := range r.backends {
		if c, ok := b.(Cleaner); ok {
			if err := c.Cleanup(ctx, scope); err != nil {
				errs = append(errs, fmt.Errorf("clean up %s: %w", b.Prefix(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Shutdown runs every backend's Shutdown.
func (r *Registry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, b := range r.backends {
		if s, ok := b.(Shutdowner); ok {
			if err := s.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("shut down %s: %w", b.Prefix(), err))
			}
		}
	}
	return errors.Join(errs...)
}
