package web_test

// The attacks on sign-in and on share-link identities (T5/T8,
// issue 28 findings 8 and 11): X-Forwarded-For rotation past the
// address limit, password guessing on one account from many addresses,
// cross-site sign-in, and a share-link token that swaps a visitor's
// session.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// frozen is a clock that stands still: the rate limits refill nothing
// while a test counts, however slowly the machine runs it.
func frozen() func() time.Time {
	at := time.Now()
	return func() time.Time { return at }
}

// login tries a sign-in from c, as a client behind forwarded (when set).
func login(t *testing.T, c *enginetest.Client, forwarded, name, password string) enginetest.Response {
	t.Helper()
	if forwarded != "" {
		c.Header.Set("X-Forwarded-For", forwarded)
	}
	return c.Do(t, "POST", "/api/login", map[string]string{"name": name, "password": password})
}

func TestAttackLoginForwardedForRotation(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LOGIN_BURST": "5"}, LimitClock: frozen()})
	c := env.Anonymous()
	statuses := map[int]int{}
	for i := range 40 {
		// A new name each time: only the address limit can stop it.
		statuses[login(t, c, "198.51.100."+strconv.Itoa(i+1), "guess-"+strconv.Itoa(i), "wrong").Status]++
	}
	if statuses[http.StatusUnauthorized] != 5 || statuses[http.StatusTooManyRequests] != 35 {
		t.Errorf("40 attempts with rotating X-Forwarded-For: %v, want 5 answered and 35 refused with 429", statuses)
	}
}

func TestLoginTrustedProxy(t *testing.T) {
	t.Parallel()
	// Behind the operator's proxy, each forwarded client has its own
	// budget, and the proxy cannot be starved by one of them.
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LOGIN_BURST": "5", "FLOWBOX_TRUSTED_PROXIES": "127.0.0.0/8,::1"},
		LimitClock: frozen()})
	c := env.Anonymous()
	for i := range 10 {
		if resp := login(t, c, "198.51.100."+strconv.Itoa(i+1), "guess-"+strconv.Itoa(i), "wrong"); resp.Status != http.StatusUnauthorized {
			t.Fatalf("forwarded client %d: %d %s, want 401", i+1, resp.Status, resp.Body)
		}
	}
	for i := range 6 {
		resp := login(t, c, "198.51.100.200", "guess-same-"+strconv.Itoa(i), "wrong")
		if want := map[bool]int{true: 429, false: 401}[i == 5]; resp.Status != want {
			t.Fatalf("the same forwarded client, attempt %d: %d, want %d", i+1, resp.Status, want)
		}
	}
}

func TestAttackLoginAccountBruteForce(t *testing.T) {
	t.Parallel()
	// enginetest allows each address 1000 attempts: only the account's
	// own limit (default 10 failures) can stop this.
	env := enginetest.Start(t, enginetest.Options{LimitClock: frozen()})
	env.CreateUser(t, "bob", auth.RoleUser)
	statuses := map[int]int{}
	for i := range 40 {
		statuses[login(t, env.Anonymous(), "203.0.113."+strconv.Itoa(i+1), enginetest.AdminName, "guess-"+strconv.Itoa(i)).Status]++
	}
	if statuses[http.StatusUnauthorized] != 10 || statuses[http.StatusTooManyRequests] != 30 {
		t.Errorf("40 guesses at one account: %v, want 10 answered and 30 refused with 429", statuses)
	}
	resp := login(t, env.Anonymous(), "", enginetest.AdminName, enginetest.AdminPassword)
	if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(resp.Body), "this account") {
		t.Errorf("the throttled account: %d %s, want 429 with Retry-After", resp.Status, resp.Body)
	}
	// Another account signs in as usual, and a success clears the count.
	for round := range 2 {
		for i := range 9 {
			if resp := login(t, env.Anonymous(), "", "bob", "wrong"); resp.Status != http.StatusUnauthorized {
				t.Fatalf("bob's typo %d of round %d: %d %s, want 401", i+1, round+1, resp.Status, resp.Body)
			}
		}
		env.Login(t, "bob", enginetest.Password("bob"))
	}
}

func TestAttackLoginCrossSite(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	body := []byte(`{"name": "admin", "password": "` + enginetest.AdminPassword + `"}`)
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   []byte
		says   string
	}{
		{"text/plain from another site", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, body, "JSON body"},
		{"text/plain without Origin", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, body, "JSON body"},
		{"a form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte("name=admin&password=" + url.QueryEscape(enginetest.AdminPassword)), "JSON body"},
		{"JSON from another origin", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, body, "another site"},
		{"JSON, Sec-Fetch-Site cross-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, body, "another site"},
	} {
		c := env.Anonymous()
		for k, v := range tc.header {
			c.Header.Set(k, v)
		}
		resp := c.Do(t, "POST", "/api/login", tc.body)
		if resp.Status != http.StatusForbidden || !strings.Contains(string(resp.Body), tc.says) {
			t.Errorf("%s: %d %s, want 403 saying %q", tc.name, resp.Status, resp.Body, tc.says)
		}
		if len(resp.Header.Values("Set-Cookie")) != 0 {
			t.Errorf("%s: a session cookie was set", tc.name)
		}
	}
	// The engine's own page (same origin) and API clients (no Origin)
	// sign in.
	page := env.Anonymous()
	page.Header.Set("Origin", env.URL)
	page.Header.Set("Sec-Fetch-Site", "same-origin")
	if resp := page.Do(t, "POST", "/api/login", body); resp.Status != http.StatusOK {
		t.Errorf("the engine's own page: %d %s", resp.Status, resp.Body)
	}
	env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
}

var switchCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestAttackShareTokenReplacesSession(t *testing.T) {
	t.Parallel()
	hook, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Token string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		uid := map[string]string{"victim-token": "victim", "attacker-token": "attacker"}[body.Token]
		if uid == "" {
			http.Error(w, "unknown token", http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"uid": uid})
	})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_OUTBOUND_ALLOW": hook.Listener.Addr().String()}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	appID := newApp(t, alice, "members")
	l := newLink(t, alice, appID, map[string]any{"name": "members", "hookUrl": hook.URL})
	victim := visit(t, env, l.URL+"?token=victim-token")
	owner := func() string {
		t.Helper()
		chatID, _ := sendTurn(t, victim, l.URL+"/api/v1/chat/completions", map[string]any{"messages": message("$ echo hi")}, 200)
		return chatOf(t, env, appID, chatID).UserID
	}
	if got := owner(); got != "share:"+l.ID+":victim" {
		t.Fatalf("the victim's chat belongs to %q", got)
	}

	// The attacker's link, opened by the victim's browser: a question,
	// no new session, no call of the hook.
	resp := victim.Do(t, "GET", l.URL+"?token=attacker-token", nil)
	if resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), "already chatting as a visitor") || len(resp.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a token over a session: %d %v %s, want the question and no cookie", resp.Status, resp.Header.Values("Set-Cookie"), clip(resp.Body))
	}
	m := switchCSRF.FindSubmatch(resp.Body)
	if m == nil {
		t.Fatalf("no switch form: %s", resp.Body)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the hook was called %d times, want 1 (the victim's own visit)", n)
	}
	if got := owner(); got != "share:"+l.ID+":victim" {
		t.Errorf("after the attacker's link the victim's next chat belongs to %q", got)
	}

	// A page elsewhere cannot press Switch: without the session's CSRF
	// token, or from another origin, the POST is refused.
	form := func(c *enginetest.Client, origin, values string) enginetest.Response {
		t.Helper()
		saved := c.Header.Clone()
		defer func() { c.Header = saved }()
		c.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			c.Header.Set("Origin", origin)
		}
		return c.Do(t, "POST", l.URL+"/switch", []byte(values))
	}
	if r := form(victim, "", "token=attacker-token"); r.Status != http.StatusForbidden {
		t.Errorf("switch without the CSRF token: %d %s", r.Status, r.Body)
	}
	if r := form(victim, "https://evil.example", "token=attacker-token&csrf="+string(m[1])); r.Status != http.StatusForbidden {
		t.Errorf("switch from another origin: %d %s", r.Status, r.Body)
	}
	if got := owner(); got != "share:"+l.ID+":victim" {
		t.Errorf("after the forged switches the victim's next chat belongs to %q", got)
	}

	// The visitor who chooses to switch does.
	if r := form(victim, env.URL, "token=attacker-token&csrf="+string(m[1])); r.Status != http.StatusSeeOther {
		t.Fatalf("the visitor's own switch: %d %s", r.Status, r.Body)
	}
	revisit(t, victim, l.URL)
	if got := owner(); got != "share:"+l.ID+":attacker" {
		t.Errorf("after switching, the chat belongs to %q", got)
	}
}
