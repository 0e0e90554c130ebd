package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// accountShots opens path (relative, or an absolute address of the
// engine) in both languages on a phone and a desktop, waits for ready,
// checks the page does not scroll sideways and saves a screenshot of
// each as name-lang-width.png. The tab ends on the English desktop page.
func accountShots(t *testing.T, e *browserEnv, tb *tab, path, ready, name string) {
	t.Helper()
	addr := path
	if !strings.HasPrefix(addr, e.url) {
		addr = e.url + path
	}
	for _, lang := range []string{"zh", "en"} {
		for _, width := range []int64{390, 1280} {
			tb.do(t, chromedp.EmulateViewport(width, 800), chromedp.Navigate(addr+"?lang="+lang), chromedp.WaitVisible(chromedp.CSS(ready)))
			if w := tb.js(t, `String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
				t.Errorf("at %d px in %s %s scrolls sideways by %s px", width, lang, path, w)
			}
			e.screenshot(t, tb, fmt.Sprintf("%s-%s-%d.png", name, lang, width))
		}
	}
}
