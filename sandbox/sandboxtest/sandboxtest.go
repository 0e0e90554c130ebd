// Package sandboxtest is the conformance suite every sandbox.Provider
// passes before it is called done: one set of behaviours (lifecycle,
// persistent shell, timeouts, limits, isolation, file confinement, the
// engine's directories mounted in) run against the real thing. It must
// never be satisfied by a fake provider.
package sandboxtest

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// Harness is what a provider's test gives the suite.
type Harness struct {
	// New returns the provider under test, configured for this test (its
	// own root directory, a small image, ...).
	New func(t *testing.T) sandbox.Provider
	// Processes returns the command lines of the sandbox's processes as
	// seen from outside it.
	Processes func(t *testing.T, p sandbox.Provider, id string) []string
	// Leftovers names whatever of a deleted sandbox is still on the
	// machine (containers, directories, cgroups); empty when nothing.
	Leftovers func(t *testing.T, p sandbox.Provider, id string) []string
	// Skip names the tests (by their name in Run) this configuration of
	// the provider cannot pass, each with why; the test is reported as
	// skipped with that reason. A name that is no test fails the suite.
	Skip map[string]string
}

var seq struct {
	sync.Mutex
	n int
}

// NewID returns a fresh sandbox id for a test.
func NewID(t testing.TB) string {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	return sandbox.IDFor("conformance", t.Name(), fmt.Sprintf("%d-%d", n, time.Now().UnixNano()))
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"LazyCreation", testLazy},
		{"EnsureIdempotentConcurrent", testEnsureConcurrent},
		{"ExecResult", testExecResult},
		{"ShellStatePersists", testPersistence},
		{"AttackShellStateIsData", testShellStateIsData},
		{"TimeoutKillsEverything", testTimeout},
		{"CommandProcessesEnd", testCommandProcessesEnd},
		{"StdinIsEmpty", testStdin},
		{"LongLived", testLongLived},
		{"OutputCapped", testOutputCap},
		{"OutputStreamsLive", testStreaming},
		{"MemoryHogKilled", testMemoryHog},
		{"ForkBombContained", testForkBomb},
		{"NoNetwork", testNoNetwork},
		{"StopKeepsFiles", testStopKeepsFiles},
		{"DeleteLeavesNothing", testDelete},
		{"FilesConfined", testFilesConfined},
		{"Mounts", testMounts},
		{"MountsRefused", testMountsRefused},
		{"PoolAdopt", testPoolAdopt},
		{"Background", testBackground},
		{"Metrics", testMetrics},
		{"Ports", testPorts},
		{"Terminal", testTerminal},
		{"Checkpoints", testCheckpoints},
	}
	names := map[string]bool{}
	for _, tc := range tests {
		names[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			if why, ok := h.Skip[tc.name]; ok {
				t.Skip(why)
			}
			tc.fn(t, h)
		})
	}
	for name := range h.Skip {
		if !names[name] {
			t.Errorf("Harness.Skip names %q, which is no conformance test", name)
		}
	}
}

// needs skips a test of an isolation feature the provider declares it
// lacks: capabilities are data, and the suite holds providers to them.
func needs(t *testing.T, p sandbox.Provider, have bool, what string) {
	t.Helper()
	if !have {
		t.Skipf("provider %s declares no %s", p.Name(), what)
	}
}

// ctxFor bounds a test step so that a broken provider fails the test
// instead of hanging it; no test asserts how fast anything is.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test with what when
// ctx ends first.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not so before the test's deadline", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// started ensures a new sandbox and deletes it when the test ends.
func started(t *testing.T, h Harness, lim sandbox.Limits) (sandbox.Provider, string) {
	t.Helper()
	p := h.New(t)
	id := NewID(t)
	spec := sandbox.Spec{ID: id, Limits: lim, Labels: map[string]string{"appId": "app", "userId": "user", "chatId": id}}
	if err := p.Ensure(ctxFor(t), spec); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), id); err != nil {
			t.Errorf("cleanup Delete: %v", err)
		}
	})
	return p, id
}

func run(t *testing.T, p sandbox.Provider, id, command string, timeout time.Duration) sandbox.ExecResult {
	t.Helper()
	res, err := p.Exec(ctxFor(t), id, sandbox.ExecRequest{Command: command, Timeout: timeout})
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	return res
}

func testLazy(t *testing.T, h Harness) {
	p := h.New(t)
	id := NewID(t)
	ctx := ctxFor(t)
	if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Status of a never-used sandbox = %q, %v; want %q", st, err, sandbox.StatusMissing)
	}
	if _, err := p.Files(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Files of a never-used sandbox: err = %v, want ErrNotFound", err)
	}
	if _, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "true", Timeout: time.Second}); err == nil {
		t.Fatal("Exec on a missing sandbox succeeded; it must not create one behind the caller's back")
	}
	res, _ := p.List(ctx)
	for _, r := range res {
		if r.ID == id {
			t.Fatalf("List shows %s before Ensure", id)
		}
	}
}

func testEnsureConcurrent(t *testing.T, h Harness) {
	p := h.New(t)
	id := NewID(t)
	ctx := ctxFor(t)
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.Ensure(ctx, sandbox.Spec{ID: id})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Ensure: %v", err)
		}
	}
	list, err := p.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	n := 0
	for _, r := range list {
		if r.ID == id {
			n++
			if r.Status != sandbox.StatusRunning {
				t.Errorf("listed status = %q, want running", r.Status)
			}
		}
	}
	if n != 1 {
		t.Fatalf("List has %d entries for the sandbox after 20 concurrent Ensure calls, want 1", n)
	}
	if res := run(t, p, id, "echo ok", 10*time.Second); res.Stdout != "ok\n" {
		t.Fatalf("stdout = %q, want %q", res.Stdout, "ok\n")
	}
}

func testExecResult(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	tests := []struct {
		command        string
		stdout, stderr string
		exit           int
	}{
		{"echo out; echo err >&2", "out\n", "err\n", 0},
		{"exit 3", "", "", 3},
		{"printf 'a\\nb'; false", "a\nb", "", 1},
		{"no-such-command-xyz 2>/dev/null", "", "", 127},
		{`printf '\377\376ok'`, "\uFFFDok", "", 0}, // invalid UTF-8 replaced
	}
	if p.Capabilities().FilesystemIsolation {
		tests = append(tests, struct {
			command        string
			stdout, stderr string
			exit           int
		}{"pwd", "/workspace\n", "", 0})
	}
	for _, tc := range tests {
		res := run(t, p, id, tc.command, 10*time.Second)
		if res.Stdout != tc.stdout || res.Stderr != tc.stderr || res.ExitCode != tc.exit || res.TimedOut {
			t.Errorf("%q: got stdout=%q stderr=%q exit=%d timedOut=%v; want stdout=%q stderr=%q exit=%d",
				tc.command, res.Stdout, res.Stderr, res.ExitCode, res.TimedOut, tc.stdout, tc.stderr, tc.exit)
		}
		if res.Duration <= 0 {
			t.Errorf("%q: duration = %v, want > 0", tc.command, res.Duration)
		}
	}
}

func testPersistence(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	ctx := ctxFor(t)
	base := strings.TrimSpace(run(t, p, id, "pwd", 10*time.Second).Stdout)
	run(t, p, id, "mkdir -p proj/sub && cd proj/sub && export GREETING='hello world' && echo content > note.txt", 10*time.Second)
	check := func(when string) {
		t.Helper()
		res := run(t, p, id, `pwd; echo "$GREETING"; cat note.txt`, 10*time.Second)
		want := base + "/proj/sub\nhello world\ncontent\n"
		if res.Stdout != want {
			t.Fatalf("%s: stdout = %q (stderr %q), want %q", when, res.Stdout, res.Stderr, want)
		}
	}
	check("next call")
	// A failing command and an explicit exit still keep what they changed.
	run(t, p, id, "export LEVEL=2; cd ..; exit 7", 10*time.Second)
	if res := run(t, p, id, `echo "$LEVEL $(pwd)"`, 10*time.Second); res.Stdout != "2 "+base+"/proj\n" {
		t.Fatalf("after exit 7: stdout = %q, want %q", res.Stdout, "2 "+base+"/proj\n")
	}
	// A variable removed stays removed, in every command after. The state
	// is written over in place, and the name sorts last in export -p's
	// list: what a longer earlier version left at its end must not come
	// back.
	run(t, p, id, "export zz_long=$(printf %0300d 0)", 10*time.Second)
	run(t, p, id, "true", 10*time.Second)
	run(t, p, id, "unset zz_long", 10*time.Second)
	for i := range 3 {
		if res := run(t, p, id, `echo "${zz_long:-gone} $LEVEL"`, 10*time.Second); res.Stdout != "gone 2\n" {
			t.Fatalf("command %d after unset: stdout = %q (stderr %q), want %q", i+1, res.Stdout, res.Stderr, "gone 2\n")
		}
	}
	run(t, p, id, "cd sub", 10*time.Second)
	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	check("after stop/start")
}

// testShellStateIsData is finding 3 of the attack run (T3): a command
// that wrote shell code into the persistent shell's state files, pointed
// env.now at it and skipped its own save had the code run, unjudged and
// unaudited, by the next command. The state is data now: the planted code
// runs nowhere, variables that would make the shell run code at its start
// are not restored, and ordinary variables with every kind of quoting
// still come back.
func testShellStateIsData(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	run(t, p, id, "touch victim", 10*time.Second)
	// $__fb_s is the state directory as the command's shell sees it
	// (/.flowbox in a sandbox; the host provider's differs).
	attack := `printf 'rm -f victim; touch pwned\n' > "$__fb_s/env.b"; ` +
		`printf 'env.b\n' > "$__fb_s/env.now"; trap - EXIT`
	run(t, p, id, attack, 10*time.Second)
	res := run(t, p, id, "pwd; ls", 10*time.Second)
	if !strings.Contains(res.Stdout, "victim") || strings.Contains(res.Stdout, "pwned") {
		t.Fatalf("after a planted env.b: ls = %q (stderr %q); the state file's code ran", res.Stdout, res.Stderr)
	}
	// Code hidden in a value, and a variable a shell runs at its start.
	plant := `echo 'touch pwned2' > boot.sh; ` +
		`printf "export BASH_ENV='$PWD/boot.sh'\nexport ENV='$PWD/boot.sh'\nexport OK='yes'\ndeclare -x A=\"\$(touch pwned3)\"\n" > "$__fb_s/env.a"; ` +
		`printf 'env.a\n' > "$__fb_s/env.now"; trap - EXIT`
	run(t, p, id, plant, 10*time.Second)
	res = run(t, p, id, `echo "ok=$OK bash_env=${BASH_ENV:-unset}"; ls`, 10*time.Second)
	if strings.Contains(res.Stdout, "pwned2") || strings.Contains(res.Stdout, "pwned3") {
		t.Fatalf("a planted BASH_ENV or a value's command substitution ran: %q (stderr %q)", res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "ok=yes bash_env=unset") {
		t.Fatalf("planted state: stdout = %q (stderr %q), want OK restored as data and BASH_ENV dropped", res.Stdout, res.Stderr)
	}
	// What a command exports still comes back, however it is quoted.
	run(t, p, id, "export Q='it'\"'\"'s \"q\" $HOME `x` \\ end\nline2\ttab'", 10*time.Second)
	want := "it's \"q\" $HOME `x` \\ end\nline2\ttab\n"
	if res := run(t, p, id, `printf '%s\n' "$Q"`, 10*time.Second); res.Stdout != want {
		t.Fatalf("a quoted variable came back as %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
}

func testTimeout(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	// Without the kill the command would outlast the test's deadline, and
	// run would fail.
	res := run(t, p, id, "echo started; sleep 977 & sleep 978; echo never", 1*time.Second)
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("timedOut=%v exit=%d, want true and 124", res.TimedOut, res.ExitCode)
	}
	if !strings.Contains(res.Stdout, "started") || strings.Contains(res.Stdout, "never") {
		t.Errorf("stdout = %q, want the output before the timeout only", res.Stdout)
	}
	if !strings.Contains(res.Stderr, "timed out") {
		t.Errorf("stderr = %q, want a note that the command timed out", res.Stderr)
	}
	var left []string
	eventually(t, ctxFor(t), "the processes of the timed-out command end", func() bool {
		left = left[:0]
		for _, c := range h.Processes(t, p, id) {
			if strings.Contains(c, "sleep 97") {
				left = append(left, c)
			}
		}
		if len(left) > 0 {
			t.Logf("still there: %q", left)
		}
		return len(left) == 0
	})
	if res := run(t, p, id, "echo alive", 10*time.Second); res.Stdout != "alive\n" {
		t.Fatalf("after a timeout: stdout = %q, want alive", res.Stdout)
	}
}

func testStdin(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	res := run(t, p, id, "cat; echo done", 5*time.Second)
	if res.TimedOut || res.Stdout != "done\n" {
		t.Fatalf("cat with no stdin: stdout=%q timedOut=%v; want it to read nothing and finish", res.Stdout, res.TimedOut)
	}
}

func testOutputCap(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	res := run(t, p, id, "echo FIRST; head -c 2000000 /dev/zero | tr '\\0' x; echo; echo LAST", 30*time.Second)
	if !res.Truncated {
		t.Fatal("2 MB of output not marked truncated")
	}
	if len(res.Stdout) > sandbox.DefaultOutputLimit+200 {
		t.Errorf("stdout kept %d bytes, want at most about %d", len(res.Stdout), sandbox.DefaultOutputLimit)
	}
	if !strings.HasPrefix(res.Stdout, "FIRST\n") || !strings.HasSuffix(res.Stdout, "\nLAST\n") || !strings.Contains(res.Stdout, "bytes truncated") {
		t.Errorf("stdout does not keep head and tail with a marker: begins %q, ends %q", res.Stdout[:20], res.Stdout[len(res.Stdout)-20:])
	}
}

// testStreaming proves output is live with a handshake: the command
// waits for a file that the test writes only once the first line has
// reached OnOutput, so it can finish only if that line arrived while it
// ran.
func testStreaming(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	ctx := ctxFor(t)
	files, err := p.Files(ctx, id)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	var mu sync.Mutex
	var out, errOut strings.Builder
	sawFirst := make(chan struct{})
	signalled := make(chan error, 1)
	go func() {
		select {
		case <-sawFirst:
			signalled <- files.WriteFile(ctx, "go-on", nil)
		case <-ctx.Done():
			signalled <- ctx.Err()
		}
	}()
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{
		Command: "echo first; echo warn >&2; while [ ! -e go-on ]; do sleep 0.1; done; echo second",
		Timeout: 60 * time.Second,
		OnOutput: func(s sandbox.Stream, b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if s == sandbox.Stdout {
				had := strings.Contains(out.String(), "first\n")
				out.Write(b)
				if !had && strings.Contains(out.String(), "first\n") {
					close(sawFirst)
				}
			} else {
				errOut.Write(b)
			}
		},
	})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.TimedOut {
		t.Fatalf("the command waited in vain for the test to see its first line live: %+v (live stdout %q)", res, out.String())
	}
	if err := <-signalled; err != nil {
		t.Fatalf("WriteFile of the signal: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.Stdout != "first\nsecond\n" || res.Stderr != "warn\n" {
		t.Errorf("result stdout=%q stderr=%q, want %q and %q", res.Stdout, res.Stderr, "first\nsecond\n", "warn\n")
	}
	if out.String() != res.Stdout || errOut.String() != res.Stderr {
		t.Fatalf("streamed stdout=%q stderr=%q, result stdout=%q stderr=%q: they must agree", out.String(), errOut.String(), res.Stdout, res.Stderr)
	}
}

// testCommandProcessesEnd holds a provider that declares
// CommandProcessesEnd to it: what a command leaves running in the
// background is gone once the command has returned.
func testCommandProcessesEnd(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	needs(t, p, p.Capabilities().CommandProcessesEnd, "end of a command's processes with the command")
	if res := run(t, p, id, "sleep 300 >/dev/null 2>&1 & echo started", 30*time.Second); res.Stdout != "started\n" {
		t.Fatalf("start a background sleep: %+v", res)
	}
	// The pattern does not match its own grep's command line.
	res := run(t, p, id, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'sleep 3[0]0' || true", 30*time.Second)
	if got := strings.TrimSpace(res.Stdout); got != "0" {
		t.Fatalf("%s background sleep(s) still run after their command returned (stderr %q); the provider declares CommandProcessesEnd", got, res.Stderr)
	}
}

func testMemoryHog(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{MemoryMiB: 64})
	needs(t, p, p.Capabilities().ResourceLimits, "resource limits")
	// The command, not what runs beside it (the agent, an init), is what
	// the OOM killer takes.
	if res := run(t, p, id, "cat /proc/self/oom_score_adj", 10*time.Second); strings.TrimSpace(res.Stdout) != "1000" {
		t.Errorf("a command's oom_score_adj = %q (stderr %q), want 1000", res.Stdout, res.Stderr)
	}
	// The shell must hold 256 MiB in one variable: far over the limit.
	res := run(t, p, id, "x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo ${#x}", 60*time.Second)
	if res.ExitCode == 0 && strings.TrimSpace(res.Stdout) == "268435456" {
		t.Fatalf("a 256 MiB allocation succeeded under a 64 MiB limit: %+v", res)
	}
	if p.Capabilities().ReportsExhaustion && !res.OOMKilled {
		t.Errorf("the memory hog's result: oomKilled=false (exit %d, stderr %q); the provider declares ReportsExhaustion", res.ExitCode, res.Stderr)
	}
	res = run(t, p, id, "echo survived", 10*time.Second)
	if res.Stdout != "survived\n" {
		t.Fatalf("after the memory hog: stdout=%q stderr=%q, want the sandbox to live on", res.Stdout, res.Stderr)
	}
	if res.OOMKilled || res.PidsLimited {
		t.Errorf("echo after the memory hog: oomKilled=%v pidsLimited=%v, want neither", res.OOMKilled, res.PidsLimited)
	}
}

func testForkBomb(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{Pids: 64})
	needs(t, p, p.Capabilities().ResourceLimits, "resource limits")
	res := run(t, p, id, "bomb() { bomb | bomb & }; bomb; sleep 3", 10*time.Second)
	// The bomb may end either way; what matters is that forks failed at
	// the limit, and what follows.
	if p.Capabilities().ReportsExhaustion && !res.PidsLimited {
		t.Errorf("the fork bomb's result: pidsLimited=false (exit %d, timedOut %v); the provider declares ReportsExhaustion", res.ExitCode, res.TimedOut)
	}
	var last sandbox.ExecResult
	eventually(t, ctxFor(t), "after a fork bomb the sandbox runs commands", func() bool {
		last = run(t, p, id, "echo contained", 10*time.Second)
		if last.Stdout != "contained\n" {
			t.Logf("not yet: %+v", last)
		}
		return last.Stdout == "contained\n"
	})
}

func testNoNetwork(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	needs(t, p, p.Capabilities().NetworkIsolation, "network isolation")
	res := run(t, p, id, "cat /proc/net/dev", 10*time.Second)
	for _, line := range strings.Split(res.Stdout, "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.Contains(name, "|") && name != "lo" {
			t.Fatalf("network interface %q visible inside; want only lo:\n%s", name, res.Stdout)
		}
	}
	if !strings.Contains(res.Stdout, "lo:") {
		t.Fatalf("/proc/net/dev = %q; want the loopback interface listed", res.Stdout)
	}
}

func testStopKeepsFiles(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	ctx := ctxFor(t)
	run(t, p, id, "echo kept > kept.txt", 10*time.Second)
	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusStopped {
		t.Fatalf("Status after Stop = %q, %v; want %q", st, err, sandbox.StatusStopped)
	}
	files, err := p.Files(ctx, id)
	if err != nil {
		t.Fatalf("Files of a stopped sandbox: %v", err)
	}
	if data, err := files.ReadFile(ctx, "kept.txt", 1<<20); err != nil || string(data) != "kept\n" {
		t.Fatalf("ReadFile on a stopped sandbox = %q, %v; want %q", data, err, "kept\n")
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	if res := run(t, p, id, "cat kept.txt", 10*time.Second); res.Stdout != "kept\n" {
		t.Fatalf("after restart: stdout = %q, want kept", res.Stdout)
	}
}

func testDelete(t *testing.T, h Harness) {
	p := h.New(t)
	id := NewID(t)
	ctx := ctxFor(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	run(t, p, id, "echo x > f; sleep 600 & echo bg", 10*time.Second)
	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Status after Delete = %q, %v; want missing", st, err)
	}
	if left := h.Leftovers(t, p, id); len(left) > 0 {
		t.Fatalf("Delete left behind: %q", left)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete of a deleted sandbox: %v", err)
	}
	list, _ := p.List(ctx)
	for _, r := range list {
		if r.ID == id {
			t.Fatalf("List still shows the deleted sandbox")
		}
	}
}

func testFilesConfined(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	ctx := ctxFor(t)
	// Links are planted by the command itself, as a hostile agent would.
	res := run(t, p, id, `mkdir -p d/e && echo inner > d/e/in.txt && printf '\000\001bin' > bin.dat &&
ln -s / rootlink && ln -s /etc/passwd pw && ln -s d/e/in.txt rel && mkfifo fifo && echo ok`, 10*time.Second)
	if res.Stdout != "ok\n" {
		t.Fatalf("setup: %+v", res)
	}
	files, err := p.Files(ctx, id)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	refused := []string{"rootlink/etc/passwd", "/workspace/pw", "fifo", "../etc/passwd", "/etc/passwd", "d"}
	for _, path := range refused {
		done := make(chan error, 1)
		go func() { _, err := files.ReadFile(ctx, path, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, sandbox.ErrInvalidPath) && !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("ReadFile(%q): err = %v, want ErrInvalidPath or ErrNotFound", path, err)
			}
		case <-ctx.Done():
			t.Fatalf("ReadFile(%q) hangs", path)
		}
	}
	if data, err := files.ReadFile(ctx, "rel", 1<<20); err != nil || string(data) != "inner\n" {
		t.Errorf("ReadFile through an inside link = %q, %v; want inner", data, err)
	}
	if err := files.WriteFile(ctx, "rootlink/tmp/escape", []byte("x")); err == nil {
		t.Error("WriteFile through a link to / succeeded")
	}
	if err := files.WriteFile(ctx, "new/dir/w.txt", []byte("written")); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if res := run(t, p, id, "cat new/dir/w.txt", 10*time.Second); res.Stdout != "written" {
		t.Errorf("the sandbox sees %q after WriteFile, want %q", res.Stdout, "written")
	}
	var buf bytes.Buffer
	if err := files.Zip(ctx, "/workspace", &buf); err != nil {
		t.Fatalf("Zip: %v", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("zip is not readable: %v", err)
	}
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
	}
	for _, want := range []string{"workspace/d/e/in.txt", "workspace/bin.dat", "workspace/new/dir/w.txt"} {
		if !names[want] {
			t.Errorf("zip lacks %s; has %v", want, names)
		}
	}
	for _, not := range []string{"workspace/fifo", "workspace/rootlink", "workspace/pw"} {
		if names[not] {
			t.Errorf("zip contains %s, which is not a regular file", not)
		}
	}
}
