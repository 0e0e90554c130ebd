package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/engine/config"
)

func TestEgressSetting(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    []string
		wantErr string
	}{
		{map[string]string{}, nil, ""},
		{map[string]string{"FLOWBOX_SANDBOX_EGRESS": " PyPI.org, *.pythonhosted.org ,"}, []string{"pypi.org", "*.pythonhosted.org"}, ""},
		{map[string]string{"FLOWBOX_SANDBOX_EGRESS": "10.0.0.1"}, nil, "FLOWBOX_SANDBOX_EGRESS"},
		{map[string]string{"FLOWBOX_SANDBOX_EGRESS": "pypi.org", "FLOWBOX_SANDBOX_NETWORK": "true"}, nil, "exclude each other"},
	} {
		c, err := config.Parse(func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one naming %q", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(c.Sandbox.Egress) != fmt.Sprint(tc.want) {
			t.Errorf("%v: Egress %q, %v; want %q", tc.env, c.Sandbox.Egress, err, tc.want)
		}
	}
}
