package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// TestAttackNetworkEmbeddedServices: finding 1 (T1), the engine's side. A
// sandbox sharing the host's network, and any local process, talked to
// the embedded Redis (PING, writes) and to the embedded FerretDB, which
// has no authentication (every user with its password hash, and a role
// set to admin). Now the engine's own Redis asks for a password only the
// engine has, the database listens on no TCP port at all but on a Unix
// socket in a 0700 directory, and a sandbox with the full network reaches
// neither; the engine itself keeps using both.
func TestAttackNetworkEmbeddedServices(t *testing.T) {
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		// The engine's own embedded database in its data directory, not
		// the test binary's shared one.
		"FLOWBOX_MONGODB_URI":     "",
		"FLOWBOX_SANDBOX_NETWORK": "true",
	}})
	svc := env.Engine.Services
	ctx := context.Background()
	redisAddr, ok := strings.CutPrefix(svc.RedisDesc, "embedded at ")
	if !ok {
		t.Fatalf("Redis %q, want the embedded one", svc.RedisDesc)
	}

	t.Run("legit: the engine uses both", func(t *testing.T) {
		if err := svc.Redis.Ping(ctx).Err(); err != nil {
			t.Errorf("the engine's Redis client: %v", err)
		}
		env.CreateUser(t, "carol", auth.RoleUser) // fails the test if the database does
	})

	t.Run("redis without the password", func(t *testing.T) {
		for _, cmd := range []string{"PING", "SET flowbox-attack 1", "KEYS *"} {
			got := redisSay(t, redisAddr, cmd)
			if !strings.HasPrefix(got, "-NOAUTH") {
				t.Errorf("%s to the embedded Redis without a password: %q, want -NOAUTH", cmd, got)
			}
		}
	})

	t.Run("no loopback port speaks MongoDB", func(t *testing.T) {
		ports := loopbackListeners(t)
		if len(ports) == 0 {
			t.Fatal("found none of this process's loopback listeners, not even the test server's")
		}
		for _, addr := range ports {
			if mongoAnswers(addr) {
				t.Errorf("an unauthenticated MongoDB client got answers at %s", addr)
			}
		}
	})

	t.Run("database socket closed to other users", func(t *testing.T) {
		socks, _ := filepath.Glob(filepath.Join(env.Config.DataDir, "mongodb", "sockets", "ferretdb-*", "ferretdb.sock"))
		if len(socks) != 1 {
			t.Fatalf("database sockets %q, want one under the data directory", socks)
		}
		for _, dir := range []string{filepath.Dir(socks[0]), filepath.Dir(filepath.Dir(socks[0]))} {
			fi, err := os.Stat(dir)
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: mode %v (%v), want 0700", dir, fi.Mode().Perm(), err)
			}
		}
		if os.Geteuid() != 0 {
			t.Skip("checking another user's access needs root")
		}
		if err := dialUnixAs(socks[0], 65534); !errors.Is(err, syscall.EACCES) {
			t.Errorf("connect to %s as uid 65534: %v, want permission denied", socks[0], err)
		}
		if err := dialUnixAs(socks[0], 0); err != nil {
			t.Errorf("connect as the engine's user: %v", err)
		}
	})

	t.Run("sandbox with the full network", func(t *testing.T) {
		scope := sandbox.Scope{AppID: "app", UserID: "mallory", ChatID: "c1"}
		host, port, _ := net.SplitHostPort(redisAddr)
		res, err := svc.Manager.Exec(ctx, scope, sandbox.ExecRequest{
			Command: fmt.Sprintf(`timeout 10 bash -c 'exec 3<>/dev/tcp/%s/%s && echo CONNECTED'; echo "exit=$?"; echo "$HTTPS_PROXY"`, host, port),
			Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		if out := res.Stdout + res.Stderr; strings.Contains(out, "CONNECTED") || !strings.Contains(out, "refused") || !strings.Contains(res.Stdout, "http://127.0.0.1:3128") {
			t.Errorf("the sandbox's connection to the engine's Redis at %s: %q, want refused, and the proxy set", redisAddr, out)
		}
	})
}

// redisSay sends one command, as a RESP array, and returns the first line
// answered.
func redisSay(t *testing.T, addr, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	args := strings.Fields(cmd)
	fmt.Fprintf(c, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return strings.TrimSpace(line)
}

// loopbackListeners are the loopback TCP addresses this process listens
// on, read from /proc: the sockets of /proc/net/tcp{,6} in state LISTEN
// whose inodes are among this process's descriptors.
func loopbackListeners(t *testing.T) []string {
	t.Helper()
	mine := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if inode, ok := strings.CutPrefix(l, "socket:["); ok {
				mine[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" || !mine[fields[9]] {
				continue
			}
			hexAddr, hexPort, _ := strings.Cut(fields[1], ":")
			port, _ := strconv.ParseUint(hexPort, 16, 16)
			host := "127.0.0.1"
			if f == "/proc/net/tcp6" {
				host = "::1"
			}
			// Listeners on every address are reachable on loopback too.
			if hexAddr == "0100007F" || strings.Trim(hexAddr, "0") == "" || hexAddr == "00000000000000000000000001000000" {
				out = append(out, net.JoinHostPort(host, strconv.Itoa(int(port))))
			}
		}
	}
	return out
}

// mongoAnswers reports whether a MongoDB client without credentials gets
// an answer to ping at addr.
func mongoAnswers(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true&serverSelectionTimeoutMS=2000&connectTimeoutMS=2000"))
	if err != nil {
		return false
	}
	defer c.Disconnect(context.Background())
	return c.Database("admin").RunCommand(ctx, map[string]int{"ping": 1}).Err() == nil
}

// dialUnixAs connects to the socket at path with the file-system identity
// of uid, as another local user would. setfsuid changes the calling
// thread only, and drops its file capabilities with a non-zero uid; the
// thread is never unlocked, so the runtime ends it after.
func dialUnixAs(path string, uid int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		unix.Setfsuid(uid)
		unix.Setfsgid(uid)
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		errc <- unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	}()
	return <-errc
}
