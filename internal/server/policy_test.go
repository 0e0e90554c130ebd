package server

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/sandbox/redact"
)

// TestReadmePolicyExample: the policy docs/POLICY.md shows is one the engine
// accepts, as an operator's file and as an app's.
func TestReadmePolicyExample(t *testing.T) {
	readme, err := os.ReadFile("../../docs/POLICY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "**Command policy**")
	if !ok {
		t.Fatal("docs/POLICY.md has no **Command policy** paragraph")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/POLICY.md's command policy paragraph has no JSON example")
	}
	p, rc, err := parsePolicy([]byte(example))
	if err != nil {
		t.Fatalf("the docs' example is refused: %v", err)
	}
	if _, err := redact.New(rc); err != nil {
		t.Fatalf("the docs' example's redaction is refused: %v", err)
	}
	if len(p.Rules) != 2 || len(p.Egress) != 2 {
		t.Errorf("parsed %+v", p)
	}
	// As an app's policy over the default operator's.
	s, err := loadShellPolicy("", noApps{})
	if err != nil {
		t.Fatal(err)
	}
	if ap := s.compile([]byte(example)); ap.err != nil {
		t.Errorf("the docs' example as an app's policy: %v", ap.err)
	}
}

type noApps struct{}

func (noApps) Get(context.Context, string) (apps.App, error) { return apps.App{}, apps.ErrNotFound }
