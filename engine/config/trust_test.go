package config

import (
	"slices"
	"strings"
	"testing"
)

func TestTrust(t *testing.T) {
	c, err := Parse(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Trust.TrustedProxies != nil || c.Trust.OutboundAllow.String() != "" || c.Trust.LoginAccountBurst != 10 ||
		!slices.Equal(c.Trust.ServiceTools, []string{"shell:*", "file:*", "skill:*"}) {
		t.Errorf("defaults: %+v", c.Trust)
	}
	if err := c.Trust.OutboundAllow.Check("127.0.0.1:80"); err == nil {
		t.Error("the default allows loopback")
	}
	c, err = Parse(env(map[string]string{"FLOWBOX_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.1", "FLOWBOX_OUTBOUND_ALLOW": "127.0.0.1:9000,10.1.0.0/16",
		"FLOWBOX_SERVICE_TOOLS": "none", "FLOWBOX_LOGIN_ACCOUNT_BURST": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Trust.TrustedProxies, []string{"10.0.0.0/8", "192.168.1.1"}) || c.Trust.ServiceTools == nil || len(c.Trust.ServiceTools) != 0 ||
		c.Trust.LoginAccountBurst != 3 || c.Trust.OutboundAllow.Check("10.1.2.3:443") != nil {
		t.Errorf("set: %+v", c.Trust)
	}
	for _, tc := range []struct{ k, v, says string }{
		{"FLOWBOX_TRUSTED_PROXIES", "proxy.internal", "FLOWBOX_TRUSTED_PROXIES"},
		{"FLOWBOX_OUTBOUND_ALLOW", "http://x/", "FLOWBOX_OUTBOUND_ALLOW"},
		{"FLOWBOX_SERVICE_TOOLS", "shell", "resource prefix"},
		{"FLOWBOX_LOGIN_ACCOUNT_BURST", "0", "FLOWBOX_LOGIN_ACCOUNT_BURST=0"},
	} {
		if _, err := Parse(env(map[string]string{tc.k: tc.v})); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s=%s: %v, want an error saying %q", tc.k, tc.v, err, tc.says)
		}
	}
}
