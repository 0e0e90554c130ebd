//go:build !linux

package bwrap

import (
	"context"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
)

// Provider is unavailable off Linux: bubblewrap needs Linux namespaces.
type Provider struct{}

var (
	_ sandbox.Provider = (*Provider)(nil)
	_ sandbox.Adopter  = (*Provider)(nil)
)

var errOS = fmt.Errorf("bwrap: %w: bubblewrap sandboxes need Linux", sandbox.ErrUnsupported)

func New(cfg Config) (*Provider, error)                              { return nil, errOS }
func (p *Provider) Name() string                                     { return "bwrap" }
func (p *Provider) Capabilities() sandbox.Capabilities               { return sandbox.Capabilities{} }
func (p *Provider) Fingerprint(context.Context) error                { return errOS }
func (p *Provider) Ensure(context.Context, sandbox.Spec) error       { return errOS }
func (p *Provider) Stop(context.Context, string) error               { return errOS }
func (p *Provider) Delete(context.Context, string) error             { return errOS }
func (p *Provider) List(context.Context) ([]sandbox.Resource, error) { return nil, errOS }
func (p *Provider) Status(context.Context, string) (sandbox.Status, error) {
	return "", errOS
}
func (p *Provider) Exec(context.Context, string, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, errOS
}
func (p *Provider) Files(context.Context, string) (sandbox.Files, error) { return nil, errOS }
func (p *Provider) Adopt(context.Context, string, sandbox.Spec) error    { return errOS }
