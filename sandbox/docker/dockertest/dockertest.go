// Package dockertest gives tests a Docker sandbox provider on the daemon
// named by DOCKER_HOST, running the tiny busybox image, with a temporary
// workspace root. It skips the test when the daemon is unreachable (fails
// when FLOWBOX_TEST_REQUIRE names docker) and removes every container the
// test's provider created. It must never touch other containers.
package dockertest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/docker"
)

// Image is the busybox image tests use, as images/busybox/build.sh builds
// it. Provider imports it when it is missing.
const Image = "flowbox-busybox:test"

// Shell is the shell of Image.
const Shell = "/bin/sh"

// Busybox is the static busybox the image is made of (Debian package
// busybox-static).
const Busybox = "/bin/busybox"

// applets are the commands the image provides at least, as links to
// busybox: what the tests run and what the persistent shell and the kill
// path need. The image links every applet the busybox binary lists.
var applets = []string{
	"sh", "sleep", "cat", "echo", "ls", "mkdir", "kill", "setsid", "ps", "dd",
	"head", "tail", "yes", "wc", "env", "pwd", "rm", "true", "false", "mv",
	"cp", "ln", "tr", "grep", "sed", "printf", "test", "[", "touch", "id",
	"chmod", "readlink", "mkfifo", "nc", "wget", "seq", "uname", "top",
}

// appletsOf lists the applets of the busybox binary at path, adding the
// required ones.
func appletsOf(path string) []string {
	names := slices.Clone(applets)
	if out, err := exec.Command(path, "--list").Output(); err == nil {
		names = append(names, strings.Fields(string(out))...)
	}
	slices.Sort(names)
	return slices.DeleteFunc(slices.Compact(names), func(n string) bool {
		return n == "busybox" || strings.Contains(n, "/")
	})
}

// Client returns a Docker client for DOCKER_HOST, or stops the test (see
// testenv.Need) when the daemon is unreachable.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		testenv.Need(t, "docker", fmt.Errorf("configure the Docker client: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		testenv.Need(t, "docker", fmt.Errorf("cannot reach the Docker daemon at %s (set DOCKER_HOST): %w", cli.DaemonHost(), err))
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// GVisor is the runtime scripts/test registers with its daemon: gVisor's
// runsc, with --network=none and --host-uds=all (see there why). It is
// also the component FLOWBOX_TEST_REQUIRE names to require it.
const GVisor = "runsc"

// Runtime returns name, for docker.Config.Runtime, when the test daemon
// has a runtime of that name, or stops the test (testenv.Need, with the
// runtime's name as the component).
func Runtime(t testing.TB, name string) string {
	t.Helper()
	cli := Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		testenv.Need(t, name, fmt.Errorf("ask the Docker daemon at %s for its runtimes: %w", cli.DaemonHost(), err))
	}
	if _, ok := res.Info.Runtimes[name]; !ok {
		testenv.Need(t, name, fmt.Errorf("the Docker daemon at %s has no runtime %q (scripts/test registers runsc when it is installed: apt-get install runsc)", cli.DaemonHost(), name))
	}
	return name
}

// ImagesDone names the file scripts/test writes, holding the build's exit
// status, once it has built the sandbox images it builds while the tests
// already run.
const ImagesDone = "FLOWBOX_TEST_IMAGES_DONE"

// SandboxImage returns the product's sandbox image, docker.DefaultImage,
// for a test on the daemon of Client(t). While scripts/test is still
// building it (ImagesDone names a file not written yet) it waits for the
// build, at most 15 minutes; when the daemon lacks the image, it stops the
// test (testenv.Need, as the component "sandbox-image").
func SandboxImage(t testing.TB) string {
	t.Helper()
	cli := Client(t)
	if done := os.Getenv(ImagesDone); done != "" {
		for deadline := time.Now().Add(15 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			if _, err := os.Stat(done); err == nil {
				break
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, docker.DefaultImage); err != nil {
		testenv.Need(t, "sandbox-image", fmt.Errorf("%s: %w (build it with images/sandbox/build.sh)", docker.DefaultImage, err))
	}
	return docker.DefaultImage
}

// Provider returns a provider for cfg on the test daemon. Zero fields get
// test defaults: Image, Shell, and a WorkspaceRoot under t.TempDir. The
// busybox image is imported first if the daemon lacks it. At cleanup,
// every container whose workspace lies under the provider's root is
// removed. For commands through the agent, set cfg.AgentBinary to
// AgentBinary(t); for the Docker exec fallback, to docker.NoAgent. Left
// empty it means the running executable, the test binary, which cannot be
// the agent: Docker execs, and a warning in the log.
func Provider(t testing.TB, cfg docker.Config) *docker.Provider {
	t.Helper()
	cli := Client(t)
	if cfg.Image == "" {
		cfg.Image = Image
	}
	if cfg.Shell == "" {
		cfg.Shell = Shell
	}
	if cfg.WorkspaceRoot == "" {
		cfg.WorkspaceRoot = filepath.Join(t.TempDir(), "sandboxes")
	}
	if cfg.DaemonWorkspaceRoot == "" {
		cfg.DaemonWorkspaceRoot = cfg.WorkspaceRoot
	}
	if cfg.Image == Image {
		if err := EnsureImage(context.Background(), cli); err != nil {
			t.Fatalf("dockertest: %v", err)
		}
	}
	p, err := docker.New(cfg)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	root := filepath.Clean(cfg.DaemonWorkspaceRoot) + string(filepath.Separator)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := removeUnder(ctx, cli, root); err != nil {
			t.Errorf("dockertest: remove the test's containers: %v", err)
		}
		p.Close()
	})
	return p
}

// removeUnder removes the product's containers that mount a directory
// under root.
func removeUnder(ctx context.Context, cli *client.Client, root string) error {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", docker.LabelManaged+"=true"),
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range res.Items {
		mine := slices.ContainsFunc(c.Mounts, func(m container.MountPoint) bool {
			return strings.HasPrefix(m.Source, root)
		})
		if !mine {
			continue
		}
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var imageMu sync.Mutex

// EnsureImage imports Image from the host's static busybox unless the
// daemon has it.
func EnsureImage(ctx context.Context, cli *client.Client) error {
	imageMu.Lock()
	defer imageMu.Unlock()
	if _, err := cli.ImageInspect(ctx, Image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect %s: %w", Image, err)
	}
	bin, err := os.ReadFile(Busybox)
	if err != nil {
		return fmt.Errorf("build %s: %w (install busybox-static, or run images/busybox/build.sh)", Image, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRootfs(pw, bin, appletsOf(Busybox))) }()
	out, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, Image, client.ImageImportOptions{
		Changes: []string{"WORKDIR /workspace", "ENV PATH=/bin", `CMD ["/bin/sh"]`},
	})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("import %s: %w", Image, err)
	}
	defer out.Close()
	msg, err := io.ReadAll(out)
	if err != nil {
		return fmt.Errorf("import %s: %w", Image, err)
	}
	if strings.Contains(string(msg), `"error"`) {
		return fmt.Errorf("import %s: %s", Image, msg)
	}
	return nil
}

// writeRootfs writes the image's root file system as a tar stream.
func writeRootfs(w io.Writer, busybox []byte, applets []string) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "workspace", ".flowbox"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(busybox)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(busybox); err != nil {
		return err
	}
	for _, a := range applets {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: now}); err != nil {
			return err
		}
	}
	for name, body := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/workspace:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: now}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// AgentBinary returns a static binary to run as the sandboxes' agent
// (docker.Config.AgentBinary): testenv.AgentBinary, the agent-only binary
// the engine ships beside itself, which the daemon, on this machine,
// sees at the same path.
func AgentBinary(t testing.TB) string {
	t.Helper()
	path := testenv.AgentBinary(t)
	if err := docker.CheckStatic(path); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	return path
}
