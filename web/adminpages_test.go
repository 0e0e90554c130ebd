package web_test

import (
	"encoding/json"
	"regexp"
	"testing"
)

// adminPageData is the admin page's data (web/ui: adminPage), as far as
// the tests read it.
type adminPageData struct {
	Sandboxes []adminSandbox `json:"sandboxes"`
	Limits    *struct {
		Caps    []adminCap     `json:"caps"`
		Busiest []adminUserUse `json:"busiest"`
	} `json:"limits"`
	Pool *struct {
		On    bool `json:"on"`
		Stats struct {
			Ready  int `json:"ready"`
			Claims int `json:"claims"`
		} `json:"stats"`
	} `json:"pool"`
}

// readAppPage reads a page the browser app draws: its name and its data,
// from the page's <script type="application/json" id="page-data">.
func readAppPage[D any](t *testing.T, body []byte) (name string, data D) {
	t.Helper()
	m := regexp.MustCompile(`<script type="application/json" id="page-data">(.*?)</script>`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("the page has no page data:\n%s", clipped(body))
	}
	var shell struct {
		Page string `json:"page"`
		Data D      `json:"data"`
	}
	if err := json.Unmarshal(m[1], &shell); err != nil {
		t.Fatalf("the page's data: %v\n%s", err, m[1])
	}
	return shell.Page, shell.Data
}

type adminSandbox struct {
	SandboxID string `json:"sandboxId"`
	Status    string `json:"status"`
}

type adminCap struct {
	Key     string `json:"key"`
	Setting string `json:"setting"`
	Limit   int    `json:"limit"`
	Use     int    `json:"use"`
}

type adminUserUse struct {
	User      string `json:"user"`
	Sandboxes int    `json:"sandboxes"`
	Runs      int    `json:"runs"`
}

// phoneFits takes a screenshot of the page at 390 px and fails when the
// page itself scrolls sideways (its wide tables scroll in their boxes).
func (e *browserEnv) phoneFits(t *testing.T, tb *tab, name string) {
	t.Helper()
	e.screenshot(t, tb, name)
	wide := tb.js(t, `(() => { const w = document.documentElement.scrollWidth; if (w <= innerWidth) return "";
		const out = [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > innerWidth + 1 && !el.closest(".table-scroll, nav"));
		return w + " px: " + out.slice(0, 5).map((el) => el.tagName + (el.id ? "#" + el.id : "") + "." + el.className).join(", "); })()`)
	if wide != "" {
		t.Errorf("%s: at 390 px the page is wider than the screen (%s)", name, wide)
	}
}
