package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// BenchmarkChatPage measures the chat page in Chromium on the real engine
// with a long chat: 200 turns whose answers are Markdown (a heading, a
// list, a table, a code block), 50 of which ran a command, beside a chat
// of 2 turns with 1 command, in the same run. The page holds a chat's
// last 100 turns; "Show earlier messages" brings the rest. open-ms is
// from navigation to the page's turns drawn with the last answer
// rendered; render-ms is the browser's part of it, from the page's HTML
// received (the rest is the engine reading the chat); settle-ms is from
// the HTML received to every answer rendered (answers out of view are
// plain text until the browser is idle); earlier-ms is from pressing
// "Show earlier messages" to every turn drawn; frame-ms is the longest
// frame while the page, with every turn, scrolls from top to bottom in 40
// steps, one per frame (16.7 ms is a frame at 60 Hz; longer ones are what
// a reader sees as stutter).
//
//	FLOWBOX_TEST_REQUIRE=bwrap,chromium go test -run '^$' -bench BenchmarkChatPage -benchtime 5x ./web
func BenchmarkChatPage(b *testing.B) {
	e := newBrowserEnv(b)
	tb := e.signInWith(b, enginetest.AdminName, enginetest.AdminPassword)
	for _, size := range []struct{ turns, cards int }{{2, 1}, {200, 50}} {
		chatID := fmt.Sprintf("bench-%d-%d", size.turns, size.cards)
		seedChat(b, e, chatID, size.turns, size.cards)
		shown := min(size.turns, 100)
		b.Run(fmt.Sprintf("turns=%d/cards=%d", size.turns, size.cards), func(b *testing.B) {
			var opens, renders, settles, earliers, frames []float64
			for i := 0; i < b.N; i++ {
				start := time.Now()
				tb.do(b, chromedp.Navigate(e.url+"/apps/demo/chat/"+chatID))
				drawn := run(b, tb, poll[float64](fmt.Sprintf(`() => document.querySelectorAll("#messages .msg").length === %d &&
					!document.querySelector("#messages .msg.assistant:last-child .text.pending") &&
					performance.now() - performance.getEntriesByType("navigation")[0].responseEnd`, 2*shown),
					chromedp.WithPollingInterval(5*time.Millisecond)))
				opens = append(opens, float64(time.Since(start).Milliseconds()))
				renders = append(renders, drawn)
				settles = append(settles, run(b, tb, poll[float64](`() => !document.querySelector("#messages .text.pending") &&
					performance.now() - performance.getEntriesByType("navigation")[0].responseEnd`, chromedp.WithPollingInterval(5*time.Millisecond))))
				if shown < size.turns {
					earliers = append(earliers, run(b, tb, chromedp.Evaluate[float64](fmt.Sprintf(`new Promise((done) => {
						const t0 = performance.now();
						document.querySelector("#messages [data-role=earlier]").click();
						const check = () => document.querySelectorAll("#messages .msg").length === %d &&
							document.querySelectorAll("#messages .tool-card").length === %d ? done(performance.now() - t0) : requestAnimationFrame(check);
						requestAnimationFrame(check);
					})`, 2*size.turns, size.cards), chromedp.EvalAwaitPromise)))
				}
				frames = append(frames, scrollFrameMillis(b, tb))
			}
			b.ReportMetric(median(opens), "open-ms")
			b.ReportMetric(median(renders), "render-ms")
			b.ReportMetric(median(settles), "settle-ms")
			if len(earliers) > 0 {
				b.ReportMetric(median(earliers), "earlier-ms")
			}
			b.ReportMetric(median(frames), "frame-ms")
		})
	}
}

// scrollFrameMillis scrolls the page (or the element that scrolls the
// messages) from top to bottom in 40 steps, one per animation frame, and
// answers the longest time between two frames.
func scrollFrameMillis(b *testing.B, tb *tab) float64 {
	b.Helper()
	const script = `new Promise((done) => {
		const scroller = [document.scrollingElement, ...document.querySelectorAll("#messages, .chat-page, .chat-layout")]
			.reduce((a, c) => (c && c.scrollHeight - c.clientHeight > a.scrollHeight - a.clientHeight ? c : a));
		scroller.scrollTop = 0;
		const steps = 40, stride = (scroller.scrollHeight - scroller.clientHeight) / steps;
		let step = 0, last = 0, longest = 0;
		const frame = (now) => {
			if (last) longest = Math.max(longest, now - last);
			last = now;
			if (step++ === steps) return done(longest);
			scroller.scrollTop = step * stride;
			requestAnimationFrame(frame);
		};
		requestAnimationFrame(frame);
	})`
	return run(b, tb, chromedp.Evaluate[float64](script, chromedp.EvalAwaitPromise))
}

// seedChat stores a chat of the admin's on the demo app with turns
// turns, cards of which ran a command with 2 KiB of output.
func seedChat(b testing.TB, e *browserEnv, chatID string, turns, cards int) {
	b.Helper()
	ctx := context.Background()
	chat := history.Of(sandbox.Scope{AppID: "demo", UserID: "u:" + enginetest.AdminName, ChatID: chatID})
	output := strings.Repeat("-rw-r--r-- 1 flowbox flowbox 4096 Nov 28 12:00 results.csv\n", 36)
	every := turns / max(cards, 1)
	for i := 0; i < turns; i++ {
		answer := history.Item{Role: "assistant", Text: fmt.Sprintf("## Step %d\n\nWhat I found:\n\n- the *first* point, with `code`\n"+
			"- the second, with a [link](https://example.com/%d)\n\n| file | size |\n| --- | --- |\n| results.csv | %d |\n\n"+
			"```python\nfor row in rows:\n    print(row[%d])\n```\n\nThe mean size is $\\bar{s} = \\frac{1}{n}\\sum_i s_i$.\n", i, i, 1000+i, i)}
		// The last turn ran a command: the page opens on a card.
		if (turns-1-i)%every == 0 && (turns-1-i)/every < cards {
			response, _ := json.Marshal(map[string]any{"stdout": output, "exitCode": 0})
			calls, _ := json.Marshal([]toolcall.Call{{ID: fmt.Sprintf("call-%d", i), Tool: "sandbox_shell",
				Arguments: `{"command":"ls -la /workspace"}`, Response: string(response), DurationMs: 42, Status: registry.StatusSuccess}})
			answer.ToolCalls = calls
		}
		var err error
		if chat, err = e.chats.AppendTurn(ctx, chat, history.Item{Role: "user", Text: fmt.Sprintf("question %d: what is in the workspace?", i)}, answer, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatLiveOutput measures the chat page in Chromium while a
// command's output streams into its open card: a command printing 5 MB
// (the card keeps the last 64 KiB, as it says; the whole output is the
// engine's) beside one printing 5 KB, in the same run. done-ms is from
// Send to the card's final status and the answer drawn; frame-ms is the
// longest frame the page had meanwhile (16.7 ms is a frame at 60 Hz; a
// page that froze would show seconds); busy-ms is the main thread's
// tasks longer than 50 ms, summed (the time a click would wait).
//
//	FLOWBOX_TEST_REQUIRE=bwrap,chromium go test -run '^$' -bench BenchmarkChatLiveOutput -benchtime 3x ./web
func BenchmarkChatLiveOutput(b *testing.B) {
	e := newBrowserEnv(b)
	tb := e.signInWith(b, enginetest.AdminName, enginetest.AdminPassword)
	for _, size := range []int{5_000, 5_000_000} {
		command := fmt.Sprintf(`$ head -c %d /dev/zero | tr '\0' x | fold -w 99`, size)
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			var dones, frames, busy []float64
			for i := 0; i < b.N; i++ {
				tb.do(b, chromedp.Navigate(e.url+"/apps/demo/chat/new"), chromedp.WaitVisible(chromedp.ID("chat-form")))
				tb.setValue(b, `#chat-form textarea`, command)
				tb.js(b, `(() => {
					window.__longest = 0; window.__busy = 0; let last = 0;
					const frame = (now) => { if (last) window.__longest = Math.max(window.__longest, now - last); last = now; requestAnimationFrame(frame); };
					requestAnimationFrame(frame);
					new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__busy += e.duration; }).observe({ type: "longtask" });
					window.__t0 = performance.now();
					document.querySelector("#chat-form [data-role=send]").click();
					return "";
				})()`)
				got := run(b, tb, poll[[]float64](`() => {
					const card = document.querySelector("#messages .tool-card");
					const text = document.querySelector("#messages .msg.assistant:last-child .text")?.textContent ?? "";
					return card && card.dataset.status === "success" && text.trim() !== "" && [performance.now() - window.__t0, window.__longest, window.__busy];
				}`, chromedp.WithPollingInterval(5*time.Millisecond)))
				dones, frames, busy = append(dones, got[0]), append(frames, got[1]), append(busy, got[2])
			}
			b.ReportMetric(median(dones), "done-ms")
			b.ReportMetric(median(frames), "frame-ms")
			b.ReportMetric(median(busy), "busy-ms")
		})
	}
}
