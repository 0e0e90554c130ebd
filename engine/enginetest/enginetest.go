// Package enginetest serves the whole product to tests exactly as engine
// serve builds it (engine.New), on a loopback server: the real router,
// accounts with real sessions and keys, the workflow engine, the workers,
// the embedded MongoDB-wire database shared by the test binary, the
// embedded Redis and bwrap sandboxes. Tests reach it over HTTP as users
// do. It is for tests only and must never be imported by product code.
package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine"
	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
)

// Credentials every Env is configured with.
const (
	AdminName     = "admin"
	AdminPassword = "admin-password-1"
	AdminToken    = "test-admin-token"
	ServiceKey    = "test-service-key"
)

// Options change what Start serves.
type Options struct {
	// Env are FLOWBOX_* variables over the defaults Start sets (the data
	// directory, the shared test database, bwrap, the credentials above,
	// quick worker polls, warn-level logs).
	Env map[string]string
	// Middleware wraps the sandbox exec chain (engine.Options).
	Middleware []sandbox.Middleware
	// Workers starts the task workers with the engine, as engine serve
	// does; without it they record deletions but run nothing until the
	// test calls Engine.StartWorkers.
	Workers bool
	// Logger defaults to warnings and errors on stderr.
	Logger *slog.Logger
	// LimitClock is the clock of the sign-in and identity-hook rate
	// limits (engine.Options); nil: time.Now.
	LimitClock func() time.Time
}

// Env is one served product.
type Env struct {
	URL string
	// Engine is the engine serving URL, a new one after Restart.
	Engine *engine.Engine
	Config config.Config

	opts Options
	srv  *httptest.Server // nil while stopped
}

// Start builds and serves the product; everything stops with the test,
// and the sandboxes the test left are deleted. bwrap is required (a skip
// or, when FLOWBOX_TEST_REQUIRE names it, a failure without it).
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx := context.Background()
	probe, err := bwrap.New(bwrap.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", probe.Fingerprint(ctx))

	uri, db := mongotest.URI(t)
	env := map[string]string{
		"FLOWBOX_DATA_DIR":         t.TempDir(),
		"FLOWBOX_MONGODB_URI":      uri,
		"FLOWBOX_MONGODB_DB":       db.Name(),
		"FLOWBOX_SANDBOX_PROVIDER": "bwrap",
		// As engine serve runs them: each running sandbox one namespace
		// with the command agent in it.
		"FLOWBOX_BWRAP_AGENT_BINARY":       testenv.AgentBinary(t),
		"FLOWBOX_ADMIN_USER":               AdminName,
		"FLOWBOX_ADMIN_PASSWORD":           AdminPassword,
		"FLOWBOX_ADMIN_TOKEN":              AdminToken,
		"FLOWBOX_API_KEY":                  ServiceKey,
		"FLOWBOX_WORKERS_POLL_INTERVAL":    "50ms",
		"FLOWBOX_WORKERS_SHUTDOWN_TIMEOUT": "5s",
		"FLOWBOX_LOG_LEVEL":                "warn",
		// Tests sign in many times from one address; the limit itself is
		// checked with the default in TestLoginLimit.
		"FLOWBOX_LOGIN_BURST": "1000",
		// Tests run many chats and sandboxes per user at once; the caps
		// are checked with values of their own in web/caps_test.go.
		"FLOWBOX_CAP_SANDBOXES":       "0",
		"FLOWBOX_CAP_USER_SANDBOXES":  "0",
		"FLOWBOX_CAP_LINK_SANDBOXES":  "0",
		"FLOWBOX_CAP_RUNS":            "0",
		"FLOWBOX_CAP_USER_RUNS":       "0",
		"FLOWBOX_CAP_LINK_RUNS":       "0",
		"FLOWBOX_CAP_APP_SANDBOXES":   "0",
		"FLOWBOX_CAP_APP_RUNS":        "0",
		"FLOWBOX_CAP_OWNER_SANDBOXES": "0",
		"FLOWBOX_CAP_OWNER_RUNS":      "0",
		// No warm pool unless a test asks for one (web/pool_test.go):
		// most tests count sandboxes, and each member is a namespace.
		"FLOWBOX_SANDBOX_POOL_SIZE": "0",
		// No checkpoints unless a test asks for them with a pool of its
		// own (checkpointtest.Pool): each engine would mount one.
		"FLOWBOX_CHECKPOINTS": "off",
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	cfg, err := config.Parse(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	e := &Env{Config: cfg, opts: opts}
	e.Engine = e.build(t)
	e.srv = httptest.NewServer(e.Engine.Handler)
	e.URL = e.srv.URL
	t.Cleanup(func() {
		if e.srv == nil { // stopped by Stop and never started again
			return
		}
		e.srv.Close()
		svc := e.Engine.Services
		list, _ := svc.Store.ByProvider(context.Background(), svc.Provider.Name())
		for _, inst := range list {
			_ = svc.Manager.Delete(context.Background(), inst.SandboxID)
		}
		// No refill after the drain.
		e.Engine.StopWorkers()
		_, _ = svc.Manager.DrainPool(context.Background())
		e.Engine.Close()
		// The chats' disks (FLOWBOX_FILES_CHAT_DISK) stay mounted, as
		// they do across engine restarts: unmounted here, so that the
		// data directory can be removed.
		testenv.UnmountUnder(e.Config.DataDir)
	})
	return e
}

// build makes an engine of e's configuration.
func (e *Env) build(t testing.TB) *engine.Engine {
	t.Helper()
	// Test passwords need no strength; sign-ins are many.
	eng, err := engine.New(context.Background(), e.Config, engine.Options{Logger: e.opts.Logger, Middleware: e.opts.Middleware, PasswordCost: bcrypt.MinCost,
		LimitClock: e.opts.LimitClock})
	if err != nil {
		t.Fatalf("build the product: %v", err)
	}
	if e.opts.Workers {
		if err := eng.StartWorkers(); err != nil {
			eng.Close()
			t.Fatal(err)
		}
	}
	return eng
}

// Stop shuts the server and the engine down, as an engine process that
// exits, leaving the sandboxes and the database as they are; start
// serves a new engine of the same configuration on the same address, as
// the process started again. Between the two, connections are refused.
func (e *Env) Stop(t testing.TB) (start func(t testing.TB)) {
	t.Helper()
	addr := e.srv.Listener.Addr().String()
	e.srv.Close()
	e.Engine.Close()
	e.srv = nil
	return func(t testing.TB) {
		t.Helper()
		eng := e.build(t)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			eng.Close()
			t.Fatalf("listen again on %s: %v", addr, err)
		}
		srv := httptest.NewUnstartedServer(eng.Handler)
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		e.Engine, e.srv = eng, srv
	}
}

// Restart stops the engine and starts a new one on the same address at
// once (Stop, then start).
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	e.Stop(t)(t)
}

// CreateUser adds an account (role auth.RoleUser or auth.RoleAdmin) with
// password "<name>-password-1" and returns its id.
func (e *Env) CreateUser(t testing.TB, name string, role auth.Role) string {
	t.Helper()
	u, err := e.Engine.Accounts.CreateUser(context.Background(), name, Password(name), role)
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return u.ID
}

// Password is the password CreateUser gives name.
func Password(name string) string { return name + "-password-1" }

// APIKey makes a personal API key of the user.
func (e *Env) APIKey(t testing.TB, userID string) string {
	t.Helper()
	key, err := e.Engine.Accounts.CreateAPIKey(context.Background(), userID, "test")
	if err != nil {
		t.Fatalf("create an API key for %s: %v", userID, err)
	}
	return key
}

// Client is one caller: a cookie jar for a browser's session, and the
// headers it sends on every request.
type Client struct {
	URL    string
	HTTP   *http.Client
	Header http.Header
	// CSRF is the session's token, sent in X-CSRF-Token when set.
	CSRF string
}

// Anonymous is a caller with no credentials.
func (e *Env) Anonymous() *Client {
	jar, _ := cookiejar.New(nil)
	return &Client{URL: e.URL, HTTP: &http.Client{Jar: jar, Timeout: 2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, Header: http.Header{}}
}

// Bearer is a caller sending Authorization: Bearer key.
func (e *Env) Bearer(key string) *Client {
	c := e.Anonymous()
	c.Header.Set("Authorization", "Bearer "+key)
	return c
}

// Login signs name in through POST /api/login, as the sign-in page does,
// and returns its session.
func (e *Env) Login(t testing.TB, name, password string) *Client {
	t.Helper()
	c := e.Anonymous()
	resp := c.Do(t, "POST", "/api/login", map[string]string{"name": name, "password": password})
	if resp.Status != http.StatusOK {
		t.Fatalf("sign in as %s: %d %s", name, resp.Status, resp.Body)
	}
	var body struct {
		CSRF string `json:"csrfToken"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil || body.CSRF == "" {
		t.Fatalf("sign in as %s: no CSRF token in %s (%v)", name, resp.Body, err)
	}
	c.CSRF = body.CSRF
	return c
}

// Response is an answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it cannot.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Do sends a request (body: nil, []byte, or a value sent as JSON) and
// reads the answer whole.
func (c *Client) Do(t testing.TB, method, path string, body any) Response {
	t.Helper()
	resp, err := c.Send(method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Send sends a request and leaves the answer to the caller (a stream).
func (c *Client) Send(method, path string, body any) (*http.Response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode the body: %w", err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.URL+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	if c.CSRF != "" {
		req.Header.Set("X-CSRF-Token", c.CSRF)
	}
	return c.HTTP.Do(req)
}
