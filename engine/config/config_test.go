package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Parse(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.MongoURI != "" || c.RedisAddr != "" || c.Sandbox.Provider != "auto" ||
		c.Sandbox.Network || c.Sandbox.MemoryMiB != 512 || c.Sandbox.Pids != 256 || c.Mode != "development" {
		t.Fatalf("defaults = %+v", c)
	}
	if !c.Workers.InServe || c.Workers.Concurrency != 10 || c.Workers.ShutdownTimeout != 30*time.Second || c.AdminToken != "" {
		t.Fatalf("worker and admin defaults = %+v, admin token %q", c.Workers, c.AdminToken)
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
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "vm"}, "use auto, bwrap, docker, kubernetes or host"},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "kubernetes"}, "FLOWBOX_KUBE_FILES_CLAIM to a ReadWriteMany claim"},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "kubernetes", "FLOWBOX_KUBE_PULL_POLICY": "sometimes"}, "FLOWBOX_KUBE_PULL_POLICY=\"sometimes\""},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "kubernetes", "FLOWBOX_SANDBOX_EGRESS": "pypi.org"}, "NetworkPolicy"},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "kubernetes", "FLOWBOX_SANDBOX_POOL_SIZE": "2"}, "no warm pool"},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "kubernetes", "FLOWBOX_KUBE_FILES_CLAIM": "files", "FLOWBOX_KUBE_FILES_HOST_PATH": "/srv"}, "both set"},
		{map[string]string{"FLOWBOX_SANDBOX_PROVIDER": "host", "FLOWBOX_MODE": "production"}, "refused in production"},
		{map[string]string{"FLOWBOX_SANDBOX_MEMORY_MIB": "lots"}, "FLOWBOX_SANDBOX_MEMORY_MIB"},
		{map[string]string{"FLOWBOX_SANDBOX_NETWORK": "maybe"}, "not true or false"},
		{map[string]string{"FLOWBOX_SANDBOX_CPUS": "0"}, "positive number"},
		{map[string]string{"FLOWBOX_FILES_CHAT_DISK": "maybe"}, "FLOWBOX_FILES_CHAT_DISK=\"maybe\": use auto, on or off"},
		{map[string]string{"FLOWBOX_FILES_CHAT_DISK": "on", "FLOWBOX_SANDBOX_PROVIDER": "docker"}, "needs FLOWBOX_SANDBOX_POOL_SIZE=0"},
		{map[string]string{"FLOWBOX_DATA_DISK_MIN_FREE": "2GB"}, "FLOWBOX_DATA_DISK_MIN_FREE=\"2GB\": use a size such as 2GiB"},
		{map[string]string{"FLOWBOX_MODE": "prod"}, "development or production"},
		{map[string]string{"FLOWBOX_WORKERS": "sometimes"}, "FLOWBOX_WORKERS"},
		{map[string]string{"FLOWBOX_WORKERS_CONCURRENCY": "0"}, "at least one task"},
		{map[string]string{"FLOWBOX_WORKERS_SHUTDOWN_TIMEOUT": "30"}, "positive duration"},
		{map[string]string{"FLOWBOX_WORKERS_POLL_INTERVAL": "-1s"}, "FLOWBOX_WORKERS_POLL_INTERVAL"},
		{map[string]string{"FLOWBOX_LOG_LEVEL": "garbage"}, "use debug, info, warn or error"},
		{map[string]string{"FLOWBOX_LOGIN_BURST": "0"}, "refuse every sign-in"},
		{map[string]string{"FLOWBOX_CAP_SANDBOXES": "-1"}, `FLOWBOX_CAP_SANDBOXES="-1" is not a whole number >= 0`},
		{map[string]string{"FLOWBOX_CAP_USER_SANDBOXES": "-5"}, "FLOWBOX_CAP_USER_SANDBOXES"},
		{map[string]string{"FLOWBOX_CAP_LINK_SANDBOXES": "many"}, "FLOWBOX_CAP_LINK_SANDBOXES"},
		{map[string]string{"FLOWBOX_CAP_RUNS": "-1"}, "FLOWBOX_CAP_RUNS"},
		{map[string]string{"FLOWBOX_CAP_USER_RUNS": "1.5"}, "FLOWBOX_CAP_USER_RUNS"},
		{map[string]string{"FLOWBOX_CAP_LINK_RUNS": "-2"}, "FLOWBOX_CAP_LINK_RUNS"},
		{map[string]string{"FLOWBOX_CAP_APP_SANDBOXES": "-1"}, "FLOWBOX_CAP_APP_SANDBOXES"},
		{map[string]string{"FLOWBOX_CAP_APP_RUNS": "x"}, "FLOWBOX_CAP_APP_RUNS"},
		{map[string]string{"FLOWBOX_CAP_OWNER_SANDBOXES": "-1"}, "FLOWBOX_CAP_OWNER_SANDBOXES"},
		{map[string]string{"FLOWBOX_CAP_OWNER_RUNS": "many"}, "FLOWBOX_CAP_OWNER_RUNS"},
	}
	for _, tc := range tests {
		_, err := Parse(env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.env, err, tc.want)
		}
	}
}

func TestCaps(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Caps
	}{
		{"defaults", nil, Caps{Sandboxes: 200, UserSandboxes: 5, LinkSandboxes: 20, AppSandboxes: 20, OwnerSandboxes: 40,
			Runs: 100, UserRuns: 3, LinkRuns: 10, AppRuns: 10, OwnerRuns: 20}},
		{"set, 0 meaning no cap", map[string]string{
			"FLOWBOX_CAP_SANDBOXES": "0", "FLOWBOX_CAP_USER_SANDBOXES": "3", "FLOWBOX_CAP_LINK_SANDBOXES": "7",
			"FLOWBOX_CAP_RUNS": "50", "FLOWBOX_CAP_USER_RUNS": "0", "FLOWBOX_CAP_LINK_RUNS": "4",
			"FLOWBOX_CAP_APP_SANDBOXES": "6", "FLOWBOX_CAP_APP_RUNS": "2",
			"FLOWBOX_CAP_OWNER_SANDBOXES": "0", "FLOWBOX_CAP_OWNER_RUNS": "8",
		}, Caps{Sandboxes: 0, UserSandboxes: 3, LinkSandboxes: 7, AppSandboxes: 6, OwnerSandboxes: 0,
			Runs: 50, UserRuns: 0, LinkRuns: 4, AppRuns: 2, OwnerRuns: 8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Caps != tc.want {
				t.Fatalf("caps = %+v, want %+v", c.Caps, tc.want)
			}
		})
	}
}

func TestWorkersAndAdmin(t *testing.T) {
	c, err := Parse(env(map[string]string{
		"FLOWBOX_WORKERS": "false", "FLOWBOX_WORKERS_CONCURRENCY": "3",
		"FLOWBOX_WORKERS_SHUTDOWN_TIMEOUT": "2m", "FLOWBOX_ADMIN_TOKEN": "s3cret",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Workers{InServe: false, Concurrency: 3, ShutdownTimeout: 2 * time.Minute, PollInterval: time.Second, AuditRetention: 90 * 24 * time.Hour}
	if c.Workers != want || c.AdminToken != "s3cret" {
		t.Fatalf("got %+v and token %q, want %+v and s3cret", c.Workers, c.AdminToken, want)
	}
}

// TestDockerAgent goes through Load, the environment cleared of FLOWBOX_*
// variables but the ones each case sets.
func TestDockerAgent(t *testing.T) {
	const agent, daemon = "FLOWBOX_DOCKER_AGENT_BINARY", "FLOWBOX_DOCKER_DAEMON_AGENT_BINARY"
	tests := []struct {
		name          string
		env           map[string]string
		agent, daemon string
		err           string
	}{
		{"default: the engine itself when static", nil, "", "", ""},
		{"none: a docker exec per command", map[string]string{agent: "none"}, "none", "", ""},
		{"a binary the daemon sees elsewhere", map[string]string{agent: "/var/lib/flowbox-agent/flowbox-engine", daemon: "/srv/flowbox-agent/flowbox-engine"},
			"/var/lib/flowbox-agent/flowbox-engine", "/srv/flowbox-agent/flowbox-engine", ""},
		{"the engine itself, seen elsewhere by the daemon", map[string]string{daemon: "/srv/flowbox-engine"}, "", "/srv/flowbox-engine", ""},
		{"a relative agent binary", map[string]string{agent: "flowbox-engine"}, "", "", agent + `="flowbox-engine": use an absolute path, or none`},
		{"a relative daemon path", map[string]string{daemon: "bin/flowbox-engine"}, "", "", daemon + `="bin/flowbox-engine": use an absolute path`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "FLOWBOX_") {
					t.Setenv(k, "")
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Load()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Sandbox.DockerAgentBinary != tc.agent || c.Sandbox.DockerDaemonAgentBinary != tc.daemon {
				t.Fatalf("agent binary %q, daemon's path %q; want %q and %q",
					c.Sandbox.DockerAgentBinary, c.Sandbox.DockerDaemonAgentBinary, tc.agent, tc.daemon)
			}
		})
	}
}

func TestDockerDaemonFilesDir(t *testing.T) {
	const key = "FLOWBOX_DOCKER_DAEMON_FILES_DIR"
	tests := []struct {
		name, value, want, err string
	}{
		{"default: the files directory as the engine sees it", "", "", ""},
		{"elsewhere for the daemon", "/srv/flowbox/files", "/srv/flowbox/files", ""},
		{"a relative path", "files", "", key + `="files": use an absolute path`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(env(map[string]string{key: tc.value}))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Sandbox.DockerDaemonFilesDir != tc.want {
				t.Fatalf("DockerDaemonFilesDir = %q, want %q", c.Sandbox.DockerDaemonFilesDir, tc.want)
			}
		})
	}
}

func TestDockerRuntime(t *testing.T) {
	const key = "FLOWBOX_DOCKER_RUNTIME"
	tests := []struct {
		name, value, want, err string
	}{
		{"default: the daemon's own", "", "", ""},
		{"gVisor", "runsc", "runsc", ""},
		{"a containerd shim", "io.containerd.runsc.v1", "io.containerd.runsc.v1", ""},
		{"a path", "/usr/bin/runsc", "", key + `="/usr/bin/runsc": use the name of a runtime the Docker daemon has`},
		{"arguments", "runsc --network=none", "", key + `="runsc --network=none": use the name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(env(map[string]string{key: tc.value}))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Sandbox.DockerRuntime != tc.want {
				t.Fatalf("DockerRuntime = %q, want %q", c.Sandbox.DockerRuntime, tc.want)
			}
		})
	}
}
