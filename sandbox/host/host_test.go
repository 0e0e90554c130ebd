package host_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/host"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

func TestRefusedUnlessAllowed(t *testing.T) {
	if _, err := host.New(host.Config{Root: t.TempDir()}); !errors.Is(err, host.ErrNotAllowed) {
		t.Fatalf("New without AllowUnsafe: err = %v, want ErrNotAllowed", err)
	}
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			p, err := host.New(host.Config{Root: t.TempDir(), AllowUnsafe: true})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Capabilities().Unsafe {
				t.Fatal("the host provider must declare itself unsafe")
			}
			return p
		},
		Processes: func(t *testing.T, p sandbox.Provider, id string) []string {
			out, _ := exec.Command("pgrep", "-af", "sleep 97").Output()
			return strings.Fields(strings.TrimSpace(string(out)))
		},
		Leftovers: func(t *testing.T, p sandbox.Provider, id string) []string {
			list, _ := p.List(context.Background())
			var left []string
			for _, r := range list {
				if r.ID == id {
					left = append(left, r.ID)
				}
			}
			return left
		},
	})
}
