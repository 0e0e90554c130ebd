package config

import (
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.MongoURI != "" || c.RedisAddr != "" || c.Sandbox.Provider != "auto" ||
		c.Sandbox.Network || c.Sandbox.MemoryMiB != 512 || c.Sandbox.Pids != 256 || c.Mode != "development" {
		t.Fatalf("defaults = %+v", c)
	}
	if !strings.HasSuffix(c.Sandbox.Root, "/data/sandboxes") {
		t.Fatalf("sandbox root = %q, want under the data dir", c.Sandbox.Root)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "vm"}, "use auto, bwrap, docker or host"},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "host", "FLOWBOX_MODE": "production"}, "refused in production"},
		{map[string]string{"FLOWBOX_SANDBOX_MEMORY_MIB": "lots"}, "FLOWBOX_SANDBOX_MEMORY_MIB"},
		{map[string]string{"FLOWBOX_SANDBOX_NETWORK": "maybe"}, "not true or false"},
		{map[string]string{"FLOWBOX_SANDBOX_CPUS": "0"}, "positive number"},
		{map[string]string{"FLOWBOX_MODE": "prod"}, "development or production"},
	}
	for _, tc := range tests {
		_, err := load(env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.env, err, tc.want)
		}
	}
}
