// Package testenv decides what a test does when a real component it needs
// (dockerd, bwrap, redis-server, Chromium, ...) is missing on this machine:
// skip with the reason locally, fail when FLOWBOX_TEST_REQUIRE names the
// component, as CI sets it. It must never pretend a component is there.
package testenv

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireEnv names the variable that lists required components,
// comma-separated (for example "docker,bwrap,redis,chromium"). The names
// in use: docker (a reachable dockerd), runsc (gVisor, registered with
// that dockerd as the runtime runsc, as scripts/test does), sandbox-image
// (the image built by images/sandbox/build.sh), bwrap (bubblewrap), redis
// (redis-server), chromium (Debian's chromium-headless-shell, or its
// Chromium, for the browser tests),
// python3 (for the example skills' scripts, run on the host by their own
// tests), netns (root and iproute2, for the network tests' own "public"
// namespace, sandbox/egress/egresstest) and kubernetes (the cluster of scripts/kube-up, named by
// KUBECONFIG, with the test images loaded; scripts/test starts it),
// openai-sdk (Node.js with web/testdata/openai-sdk installed by npm ci,
// for TestOpenAISDK) and btrfs (root, loop devices and btrfs-progs'
// mkfs.btrfs, for the checkpoint pool, sandbox/checkpoint).
const RequireEnv = "FLOWBOX_TEST_REQUIRE"

// Required reports whether FLOWBOX_TEST_REQUIRE names component.
func Required(component string) bool {
	for _, c := range strings.Split(os.Getenv(RequireEnv), ",") {
		if strings.TrimSpace(c) == component {
			return true
		}
	}
	return false
}

// Need stops the test when why is not nil: a failure if the component is
// required, a skip otherwise. why says what is missing and how to get it.
func Need(t testing.TB, component string, why error) {
	t.Helper()
	if why == nil {
		return
	}
	if Required(component) {
		t.Fatalf("%s is required (%s=%q) but unavailable: %v", component, RequireEnv, os.Getenv(RequireEnv), why)
	}
	t.Skipf("%s unavailable, skipping: %v", component, why)
}

// UnmountUnder detaches every mount under dir, deepest first.
func UnmountUnder(dir string) {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var points []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
		mutable(points[i])
	}
}

// mutable clears a directory's immutable attribute (chattr -i): the
// checkpoint pool's mount points have it while they are mounted, and
// keep it after a detach, which would stop the test's directory from
// being removed.
func mutable(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	const immutable = 0x10 // FS_IMMUTABLE_FL
	if flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS); err == nil && flags&immutable != 0 {
		_ = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags&^immutable)
	}
}
