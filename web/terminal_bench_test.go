package web_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// BenchmarkTerminalEcho measures a keystroke's round trip: a character
// sent until the terminal's echo of it comes back, through the engine's
// WebSocket (the page's path) and, as the baseline in the same run,
// straight through the sandbox's terminal (the agent's pty op alone).
// Each reports its p50. Then `cat` of a 10 MB file through the
// WebSocket, as MB/s. On bwrap, on Docker (runc) and on Docker under
// gVisor (runsc).
//
//	go test -run '^$' -bench TerminalEcho -benchtime 500x ./web/
func BenchmarkTerminalEcho(b *testing.B) {
	b.Run("bwrap", func(b *testing.B) { benchmarkTerminalEcho(b, nil) })
	b.Run("docker", func(b *testing.B) { benchmarkTerminalEcho(b, dockerEnv(b, "")) })
	b.Run("gvisor", func(b *testing.B) { benchmarkTerminalEcho(b, dockerEnv(b, "runsc")) })
}

func benchmarkTerminalEcho(b *testing.B, config map[string]string) {
	env := enginetest.Start(b, enginetest.Options{Env: config})
	env.CreateUser(b, "bench-term", auth.RoleUser)
	c := env.Login(b, "bench-term", enginetest.Password("bench-term"))
	ctx := context.Background()
	m := env.Engine.Services.Manager
	scope := sandbox.Scope{AppID: "demo", UserID: "u:bench-term", ChatID: "bench-term-direct"}
	direct, err := m.OpenTerminal(ctx, scope, 80, 24)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	ws, _, err := dialTerminal(ctx, env, c, "demo", "bench-term-ws", "")
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	// The prompt: bash's "# " (root) or busybox's "$ ".
	for seen := ""; !strings.Contains(seen, "# ") && !strings.Contains(seen, "$ "); {
		_, data, err := ws.Read(ctx)
		if err != nil {
			b.Fatalf("no prompt (%v); the terminal showed %q", err, seen)
		}
		seen += string(data)
	}
	buf := make([]byte, 4096)
	waitDirect := func(want byte) {
		for {
			n, err := direct.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			for _, x := range buf[:n] {
				if x == want {
					return
				}
			}
		}
	}
	// The prompt first.
	for n := 0; n < 2; {
		k, err := direct.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range buf[:k] {
			if x == '#' || x == '$' {
				n = 2
			}
		}
	}
	keys := "abcdefghijklmnopqrstuvwxyz"
	var viaWS, viaAgent []time.Duration
	b.ResetTimer()
	for i := range b.N {
		k := keys[i%len(keys)]
		start := time.Now()
		if err := ws.Write(ctx, websocket.MessageBinary, []byte{k}); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			_, data, err := ws.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got = slices.Contains(data, k)
		}
		viaWS = append(viaWS, time.Since(start))
		start = time.Now()
		if _, err := direct.Write([]byte{k}); err != nil {
			b.Fatal(err)
		}
		waitDirect(k)
		viaAgent = append(viaAgent, time.Since(start))
		if i%60 == 59 {
			// A line of keys: rub it out (Ctrl+U) in both.
			_ = ws.Write(ctx, websocket.MessageBinary, []byte{21})
			_, _ = direct.Write([]byte{21})
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(viaWS), "websocket-p50-ms")
	b.ReportMetric(p50(viaAgent), "agent-p50-ms")

	// 10 MB through the page's path.
	_ = ws.Write(ctx, websocket.MessageBinary, []byte{21})
	_ = ws.Write(ctx, websocket.MessageBinary, []byte("head -c 10000000 /dev/zero | tr '\\0' x > /tmp/ten; echo ready\r"))
	readUntil(ctx, b, ws, "ready\r\n")
	start := time.Now()
	_ = ws.Write(ctx, websocket.MessageBinary, []byte("cat /tmp/ten; echo; echo cat-$((1+1))-done\r"))
	total := 0
	var tail []byte
	for !bytes.Contains(tail, []byte("cat-2-done")) {
		_, data, err := ws.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		total += len(data)
		tail = append(tail, data...)
		tail = tail[max(0, len(tail)-64):]
	}
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(total)/1e6/secs, "cat-MB/s")
}
