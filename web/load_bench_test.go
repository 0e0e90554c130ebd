package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

// Settings of BenchmarkChatLoad.
const (
	loadUsersEnv    = "FLOWBOX_LOAD_USERS"    // concurrent users, default 50
	loadDurationEnv = "FLOWBOX_LOAD_DURATION" // how long they chat, default 60s
	loadTurnsInChat = 10                      // turns before a user starts a new chat
)

// BenchmarkChatLoad puts the chat API under load as users meet it: the
// product's HTTP handler (accounts, API keys, rate limits, the chat API)
// on a loopback server, the embedded database, bwrap sandboxes and the
// demo app with its offline model. Each user chats in chats of its own,
// one turn after another, every other turn a `$ command` that runs in the
// chat's sandbox. It runs for the set duration whatever b.N is (with
// -short: 5 users for 5 s unless set); run it once:
//
//	go test -run '^$' -bench ChatLoad -benchtime 1x -timeout 10m ./web/
//	FLOWBOX_LOAD_USERS=5 FLOWBOX_LOAD_DURATION=5s go test -run '^$' -bench ChatLoad -benchtime 1x ./web/
//
// A turn is timed from sending the request to the end of the response
// (the turn recorded in the history). A user faster than the chat rate
// limit allows gets 429: it waits 100 ms and sends the turn again (counted
// as rate-limited, not as a turn). A turn fails on any other status but 200,
// a missing [DONE], an error event, or a command whose output is not what
// it printed. Memory is sampled every second in this process, which holds
// the engine, the embedded database and the clients.
func BenchmarkChatLoad(b *testing.B) {
	users, duration := 50, 60*time.Second
	if testing.Short() {
		users, duration = 5, 5*time.Second
	}
	if v := os.Getenv(loadUsersEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", loadUsersEnv, v)
		}
		users = n
	}
	if v := os.Getenv(loadDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a duration such as 60s", loadDurationEnv, v)
		}
		duration = d
	}
	url, keys := newLoadEnv(b, users)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: users}}
	defer client.CloseIdleConnections()

	// One turn creates the collections; the embedded database indexes
	// them within seconds, here at once, as a running engine has them.
	if r := chatTurn(client, url, keys[0], "warm-up", 1); r.err != "" {
		b.Fatal(r.err)
	}
	mongotest.IndexIDs(b)

	b.ResetTimer()
	loadBefore := loadAverage()
	mem := sampleMemory(time.Second)
	deadline := time.Now().Add(duration)
	results := make([][]turnResult, users)
	var limited atomic.Int64
	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := 0; time.Now().Before(deadline); {
				chatID := fmt.Sprintf("load-%d-%d", u, turn/loadTurnsInChat)
				r := chatTurn(client, url, keys[u], chatID, turn)
				if r.limited {
					// Faster than the product lets one user go: wait as
					// a client should, and send the turn again.
					limited.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				results[u] = append(results[u], r)
				turn++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(deadline.Add(-duration))
	heap, rss := mem()
	b.StopTimer()
	loadAfter := loadAverage()

	var all, plain, command []time.Duration
	var failed []string
	for _, rs := range results {
		for _, r := range rs {
			all = append(all, r.took)
			if r.command {
				command = append(command, r.took)
			} else {
				plain = append(plain, r.took)
			}
			if r.err != "" {
				failed = append(failed, r.err)
			}
		}
	}
	if len(all) == 0 {
		b.Fatal("no turn finished")
	}
	for i, f := range failed {
		if i == 5 {
			b.Logf("... and %d more", len(failed)-5)
			break
		}
		b.Logf("failed turn: %s", f)
	}
	b.Logf("%d users for %v: %d turns (%d plain, %d with a command), %d failed, %d refused by the rate limit and sent again; load average %s before, %s after",
		users, duration, len(all), len(plain), len(command), len(failed), limited.Load(), loadBefore, loadAfter)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "turns/s")
	b.ReportMetric(ms(percentile(all, 50)), "ms-p50")
	b.ReportMetric(ms(percentile(all, 99)), "ms-p99")
	b.ReportMetric(ms(percentile(plain, 50)), "ms-plain-p50")
	b.ReportMetric(ms(percentile(command, 50)), "ms-cmd-p50")
	b.ReportMetric(ms(percentile(command, 99)), "ms-cmd-p99")
	b.ReportMetric(float64(len(failed)), "errors")
	b.ReportMetric(float64(limited.Load()), "rate-limited")
	b.ReportMetric(heap, "MiB-heap-max")
	b.ReportMetric(rss, "MiB-rss-max")
	b.ReportMetric(0, "ns/op") // one pass of fixed length: per-op time means nothing
}

// newLoadEnv serves the product as engine serve builds it and returns its
// URL and one API key per user.
func newLoadEnv(b *testing.B, users int) (string, []string) {
	env := enginetest.Start(b, enginetest.Options{})
	keys := make([]string, users)
	for i := range keys {
		keys[i] = env.APIKey(b, env.CreateUser(b, fmt.Sprintf("load-%d", i), auth.RoleUser))
	}
	return env.URL, keys
}

type turnResult struct {
	took    time.Duration
	command bool
	limited bool   // refused by the chat rate limit (429)
	err     string // empty: the turn succeeded
}

// chatTurn sends one turn and reads its answer to the end.
func chatTurn(client *http.Client, url, key, chatID string, turn int) turnResult {
	command := turn%2 == 1
	msg := fmt.Sprintf("hello, this is turn %d", turn)
	marker := fmt.Sprintf("turn-%d-of-%s", turn, chatID)
	if command {
		msg = fmt.Sprintf("$ echo %s > note-%d.txt && cat note-%d.txt && ls | wc -l", marker, turn, turn)
	}
	body, _ := json.Marshal(map[string]any{"appId": apps.DemoAppID, "chatId": chatID, "stream": true, "detail": true,
		"messages": []map[string]string{{"role": "user", "content": msg}}})
	start := time.Now()
	r := turnResult{command: command}
	fail := func(format string, args ...any) turnResult {
		r.took = time.Since(start)
		r.err = fmt.Sprintf("chat %s turn %d: ", chatID, turn) + fmt.Sprintf(format, args...)
		return r
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return fail("%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		r.limited = true
		return r
	}
	if resp.StatusCode != http.StatusOK {
		var e bytes.Buffer
		e.ReadFrom(resp.Body)
		return fail("status %d: %s", resp.StatusCode, strings.TrimSpace(e.String()))
	}
	var event string
	var done, ranCommand bool
	var problem string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch event {
		case "error":
			problem = "error event: " + data
		case "toolResponse":
			var ev struct {
				Tool struct {
					Status   string `json:"status"`
					Response string `json:"response"`
				} `json:"tool"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Tool.Status != "success" || !strings.Contains(ev.Tool.Response, marker) {
				problem = "the command did not print its marker: " + data
			}
			ranCommand = true
		case "answer":
			done = done || data == "[DONE]"
		}
	}
	r.took = time.Since(start)
	switch {
	case sc.Err() != nil:
		return fail("reading the stream: %v", sc.Err())
	case problem != "":
		return fail("%s", problem)
	case !done:
		return fail("the stream ended without [DONE]")
	case command && !ranCommand:
		return fail("no command ran")
	}
	return r
}

// sampleMemory samples the heap in use and the resident set every period
// until the returned function is called; that returns the largest of each,
// in MiB.
func sampleMemory(period time.Duration) func() (heap, rss float64) {
	stop, done := make(chan struct{}), make(chan struct{})
	var maxHeap, maxRSS uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		maxHeap = max(maxHeap, ms.HeapInuse)
		maxRSS = max(maxRSS, residentBytes())
	}
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() (float64, float64) {
		close(stop)
		<-done
		return float64(maxHeap) / (1 << 20), float64(maxRSS) / (1 << 20)
	}
}

// residentBytes reads VmRSS from /proc (0 where there is none).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
