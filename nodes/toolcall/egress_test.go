package toolcall_test

import (
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes/toolcall"
)

// The prompt says what a sandbox with an allowlist reaches, and only then.
func TestEgressPromptSuffix(t *testing.T) {
	for _, tc := range []struct {
		env       toolcall.Environment
		want, not string
	}{
		{toolcall.Environment{Egress: []string{"pypi.org", "*.pythonhosted.org"}}, "- Network: only HTTP and HTTPS to pypi.org, *.pythonhosted.org, through a proxy", "Network: none"},
		{toolcall.Environment{}, "- Network: none", "proxy"},
		{toolcall.Environment{Network: true}, "- Network: available", "proxy"},
	} {
		got := toolcall.New(toolcall.Config{Env: tc.env}).PromptSuffix()
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("Environment %+v: suffix\n%s\nwant %q, not %q", tc.env, got, tc.want, tc.not)
		}
	}
}
