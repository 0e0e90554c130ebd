package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// BenchmarkPreview measures what a preview link adds to a request: the
// same GET of a small page from the same server in a bwrap sandbox, from
// inside the sandbox (the baseline: Python's http.client, a connection a
// request as the server closes each) and through the link (the engine's
// proxy, the agent's dial op, loopback HTTP to the engine, kept alive).
// Each reports its p50; then wake-on-request: a request to the link of a
// stopped sandbox, to its first byte (the page saying nothing listens),
// beside the same request to the running sandbox.
//
//	go test -run '^$' -bench Preview -benchtime 300x ./web/
func BenchmarkPreview(b *testing.B) {
	srv := newPreviewServer(b)
	env := enginetest.Start(b, enginetest.Options{})
	ctx := context.Background()
	user := env.CreateUser(b, "bench-preview", auth.RoleUser)
	scope := sandbox.Scope{AppID: "bench-app", UserID: user, ChatID: "bench-preview"}
	m, links := env.Engine.Services.Manager, env.Engine.Services.Previews
	exec := func(cmd string, background bool) sandbox.ExecResult {
		res, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: cmd, Timeout: 5 * time.Minute, Background: background})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: %+v, %v", cmd, res, err)
		}
		return res
	}
	exec("mkdir -p site && echo '<h1>hello preview</h1>' > site/index.html && "+srv.write, false)
	exec(srv.start, true)
	exec(srv.wait, false)
	link, err := links.Issue(ctx, scope, 8765)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := links.Update(ctx, scope, 8765, true, 0); err != nil {
		b.Fatal(err)
	}
	closed, err := links.Issue(ctx, scope, 8766)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := links.Update(ctx, scope, 8766, true, 0); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{}
	get := func(path string, want int) time.Duration {
		start := time.Now()
		resp, err := client.Get(env.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		return time.Since(start)
	}
	get(link.Path()+"site/", 200)

	b.ResetTimer()
	var proxied []time.Duration
	for range b.N {
		proxied = append(proxied, get(link.Path()+"site/", 200))
	}
	b.StopTimer()
	inside := exec(fmt.Sprintf(`python3 - <<'EOF'
import http.client, time
times = []
for _ in range(%d):
    start = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", 8765)
    c.request("GET", "/site/")
    c.getresponse().read()
    c.close()
    times.append(time.perf_counter() - start)
times.sort()
print(times[len(times) // 2] * 1000)
EOF`, b.N), false)
	insideMs, err := strconv.ParseFloat(strings.TrimSpace(inside.Stdout), 64)
	if err != nil {
		b.Fatalf("the inside client printed %q", inside.Stdout)
	}
	slices.Sort(proxied)
	p50 := float64(proxied[len(proxied)/2].Microseconds()) / 1000
	b.ReportMetric(insideMs, "inside-p50-ms")
	b.ReportMetric(p50, "preview-p50-ms")
	b.ReportMetric(p50-insideMs, "added-p50-ms")

	// Wake-on-request, five times, beside the running sandbox's answer.
	var running, woken []time.Duration
	for range 5 {
		running = append(running, get(closed.Path(), http.StatusBadGateway))
		if err := m.Stop(ctx, scope.SandboxID()); err != nil {
			b.Fatal(err)
		}
		woken = append(woken, get(closed.Path(), http.StatusBadGateway))
	}
	slices.Sort(running)
	slices.Sort(woken)
	b.ReportMetric(float64(running[2].Microseconds())/1000, "running-p50-ms")
	b.ReportMetric(float64(woken[2].Microseconds())/1000, "wake-p50-ms")
}
