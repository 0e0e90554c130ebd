package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const testToken = "t0ken"

// mcpServer is a real MCP server of the SDK over streamable HTTP that
// wants a bearer token and a team header.
type mcpServer struct {
	srv   *mcp.Server
	http  *httptest.Server
	lists atomic.Int32 // tools/list requests answered
	// listDelay slows tools/list, so that concurrent listings overlap.
	listDelay time.Duration
	// release ends the calls of block: the SDK's server closes a session
	// only once its calls have ended.
	release chan struct{}
}

type echoArgs struct {
	Text string `json:"text"`
}

type addArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type sum struct {
	Sum float64 `json:"sum"`
}

func newMCPServer(t *testing.T) *mcpServer {
	t.Helper()
	ms := &mcpServer{srv: mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1.0.0"}, nil), release: make(chan struct{})}
	mcp.AddTool(ms.srv, &mcp.Tool{Name: "echo", Description: "Send the text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	no := false
	mcp.AddTool(ms.srv, &mcp.Tool{Name: "add", Description: "Add two numbers.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		func(ctx context.Context, req *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, sum, error) {
			return nil, sum{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(ms.srv, &mcp.Tool{Name: "files.read", Description: "A dotted name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "read"}}}, nil, nil
		})
	mcp.AddTool(ms.srv, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil, nil
		})
	mcp.AddTool(ms.srv, &mcp.Tool{Name: "block", Description: "Never answers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-ms.release:
			}
			return nil, nil, errors.New("released")
		})
	ms.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				ms.lists.Add(1)
				time.Sleep(ms.listDelay)
			}
			return next(ctx, method, req)
		}
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms.srv }, nil)
	ms.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken || r.Header.Get("X-Team") != "blue" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		// A client's session may keep a stream open: cut it, or Close
		// waits for it.
		ms.http.CloseClientConnections()
		ms.http.Close()
	})
	t.Cleanup(func() { close(ms.release) }) // first
	return ms
}

// register stores an enabled HTTP server for ms under id.
func (ms *mcpServer) register(t *testing.T, store *Store, id string) Server {
	t.Helper()
	srv, err := store.Put(context.Background(), Server{ID: id, Name: "Test " + id, Transport: TransportHTTP, URL: ms.http.URL,
		Headers: map[string]string{"X-Team": "blue"}, Token: testToken, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// countingTransport counts the requests that reach the network.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

type httpEnv struct {
	store  *Store
	client *Client
	clock  *clock
	net    *countingTransport
}

func newHTTPEnv(t *testing.T, cfg Config) *httpEnv {
	t.Helper()
	e := &httpEnv{store: NewStore(mongotest.DB(t)), clock: &clock{now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}, net: &countingTransport{}}
	cfg.Servers, cfg.Now, cfg.HTTPClient = e.store, e.clock.Now, &http.Client{Transport: e.net}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.client = c
	return e
}

func names(tools []Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func byOriginal(tools []Tool, original string) (Tool, bool) {
	for _, t := range tools {
		if t.Original == original {
			return t, true
		}
	}
	return Tool{}, false
}

func TestHTTPListAndCall(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	ms.register(t, e.store, "web")
	ctx := context.Background()

	tools, err := e.client.Tools(ctx, "web", Target{})
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	if len(tools) != 5 {
		t.Fatalf("Tools: got %q; want the server's 5 tools", names(tools))
	}
	for _, tool := range tools {
		if !modelName.MatchString(tool.Name) || !strings.HasPrefix(tool.Name, "web__") || tool.ServerID != "web" {
			t.Errorf("tool %q of %q: not a valid prefixed name", tool.Name, tool.Original)
		}
		var schema map[string]any
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("tool %q: input schema %s; want an object schema", tool.Name, tool.InputSchema)
		}
	}
	echo, _ := byOriginal(tools, "echo")
	if echo.Name != "web__echo" || !echo.ReadOnly || echo.Description != "Send the text back." || !strings.Contains(string(echo.InputSchema), `"text"`) {
		t.Errorf("echo: got %+v", echo)
	}
	if add, _ := byOriginal(tools, "add"); add.ReadOnly || add.Destructive == nil || *add.Destructive {
		t.Errorf("add: got readOnly %v, destructive %v; want false and false", add.ReadOnly, add.Destructive)
	}
	dotted, _ := byOriginal(tools, "files.read")
	if !strings.HasPrefix(dotted.Name, "web__files_read_") {
		t.Errorf("files.read: got name %q; want web__files_read_<hash>", dotted.Name)
	}
	if d := echo.LLM(); d.Function.Name != "web__echo" || !strings.Contains(d.Function.Description, "Test web") || string(d.Function.Parameters) != string(echo.InputSchema) {
		t.Errorf("LLM(): got %+v", d)
	}

	tests := []struct {
		name, tool, args string
		want             string
		isError          bool
	}{
		{"echo", "web__echo", `{"text":"hi there"}`, "echo: hi there", false},
		{"structured", "web__add", `{"a":2,"b":3}`, `{"sum":5}`, false},
		{"hashed name", dotted.Name, ``, "read", false},
		{"tool error", "web__fail", `{}`, "boom", true},
		{"arguments not an object", "web__echo", `["hi"]`, "must be a JSON object", true},
		{"broken arguments", "web__echo", `{"text":`, "must be a JSON object", true},
		{"unknown tool", "web__nope", `{}`, `has no tool "web__nope" now; its tools are: web__add, web__block, web__echo`, true},
		{"no server part", "echo", `{}`, `no MCP tool named "echo"`, true},
		{"unknown server", "gone__echo", `{}`, `MCP server "gone" no longer exists`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.client.Call(ctx, tt.tool, json.RawMessage(tt.args), Target{})
			if err != nil {
				t.Fatalf("Call: %v; want a result", err)
			}
			if !strings.Contains(res.Text, tt.want) || res.IsError != tt.isError || res.Command != "" {
				t.Errorf("Call: got %+v; want a text with %q, isError %v", res, tt.want, tt.isError)
			}
		})
	}
}

func TestHTTPCredentials(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	ctx := context.Background()
	_, err := e.store.Put(ctx, Server{ID: "web", Name: "Web", Transport: TransportHTTP, URL: ms.http.URL,
		Headers: map[string]string{"X-Team": "blue"}, Token: "wrong", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client.Tools(ctx, "web", Target{})
	var se *ServerError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "check the token") {
		t.Fatalf("Tools with a wrong token: %v; want a *ServerError naming HTTP 401 and the token", err)
	}
	res, err := e.client.Call(ctx, "web__echo", json.RawMessage(`{"text":"x"}`), Target{})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "HTTP 401") {
		t.Fatalf("Call with a wrong token: %+v, %v; want a result saying HTTP 401", res, err)
	}

	// The right token, but the team header missing: refused as well.
	if _, err := e.store.Update(ctx, Server{ID: "web", Name: "Web", Transport: TransportHTTP, URL: ms.http.URL, Token: testToken, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Tools(ctx, "web", Target{}); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("Tools without the header: %v; want HTTP 401", err)
	}
	if _, err := e.store.Update(ctx, Server{ID: "web", Name: "Web", Transport: TransportHTTP, URL: ms.http.URL, Token: Masked,
		Headers: map[string]string{"X-Team": "blue"}, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	// The settings changed, so the remembered failure is not used.
	if tools, err := e.client.Tools(ctx, "web", Target{}); err != nil || len(tools) != 5 {
		t.Fatalf("Tools with the right credentials: %q, %v", names(tools), err)
	}
}

// TestCredentialsStayHome checks that the secrets go to the server's own
// origin only, not to another one a redirect would lead to.
func TestCredentialsStayHome(t *testing.T) {
	var got []http.Header
	var mu sync.Mutex
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	})
	other := httptest.NewServer(record)
	defer other.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
			return
		}
		record(w, r)
	}))
	defer home.Close()
	cred := &credentials{base: http.DefaultTransport, origin: strings.ToLower(home.URL), headers: map[string]string{"X-Team": "blue"}, token: "s3cret"}
	client := &http.Client{Transport: cred}
	for _, path := range []string{"/mcp", "/away"} {
		resp, err := client.Get(home.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("got %d requests; want 2", len(got))
	}
	if got[0].Get("Authorization") != "Bearer s3cret" || got[0].Get("X-Team") != "blue" {
		t.Errorf("request to the server: headers %v; want the token and the team", got[0])
	}
	if got[1].Get("Authorization") != "" || got[1].Get("X-Team") != "" {
		t.Errorf("request to another origin: headers %v; want no secrets", got[1])
	}
}

func TestHTTPCacheAndRefresh(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	srv := ms.register(t, e.store, "web")
	ctx := context.Background()

	list := func(refresh bool) []string {
		t.Helper()
		f := e.client.Tools
		if refresh {
			f = e.client.Refresh
		}
		tools, err := f(ctx, "web", Target{})
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		return names(tools)
	}
	has := func(names []string, name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
	list(false)
	list(false)
	if n := ms.lists.Load(); n != 1 {
		t.Fatalf("two listings within the TTL reached the server %d times; want 1", n)
	}

	mcp.AddTool(ms.srv, &mcp.Tool{Name: "late", Description: "Added later."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late answer"}}}, nil, nil
		})
	if got := list(false); has(got, "web__late") {
		t.Fatalf("cached listing: got %q; want the list from before the new tool", got)
	}
	if got := list(true); !has(got, "web__late") || ms.lists.Load() != 2 {
		t.Fatalf("after Refresh: got %q (%d listings); want web__late, from a second listing", got, ms.lists.Load())
	}

	// A tool the cached list lacks is looked for once more before the
	// model is told it does not exist.
	mcp.AddTool(ms.srv, &mcp.Tool{Name: "later"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "later answer"}}}, nil, nil
	})
	if res, err := e.client.Call(ctx, "web__later", nil, Target{}); err != nil || res.Text != "later answer" {
		t.Fatalf("Call of a tool added after the listing: %+v, %v", res, err)
	}
	n := ms.lists.Load()

	e.clock.Add(DefaultCacheTTL - time.Second)
	list(false)
	if ms.lists.Load() != n {
		t.Fatalf("a listing before the TTL passed reached the server")
	}
	e.clock.Add(2 * time.Second)
	list(false)
	if ms.lists.Load() != n+1 {
		t.Fatalf("a listing after the TTL passed did not reach the server")
	}

	// New settings for the server: its list is fetched again.
	srv.Name = "Renamed"
	srv.Token = Masked
	srv.Headers = map[string]string{"X-Team": Masked}
	if _, err := e.store.Update(ctx, srv); err != nil {
		t.Fatal(err)
	}
	tools, err := e.client.Tools(ctx, "web", Target{})
	if err != nil || ms.lists.Load() != n+2 || tools[0].ServerName != "Renamed" {
		t.Fatalf("after an update: %d listings, %v; want a new listing with the new name", ms.lists.Load()-n, err)
	}
}

func TestHTTPConcurrentListingsFetchOnce(t *testing.T) {
	ms := newMCPServer(t)
	ms.listDelay = 200 * time.Millisecond
	e := newHTTPEnv(t, Config{})
	ms.register(t, e.store, "web")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			tools, err := e.client.Tools(context.Background(), "web", Target{})
			if err == nil && len(tools) != 5 {
				err = errors.New("got " + strings.Join(names(tools), ","))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := ms.lists.Load(); n != 1 {
		t.Errorf("8 concurrent listings reached the server %d times; want 1", n)
	}

	// Concurrent refreshes: each is served by a fetch that began after it
	// was asked, so at most as many fetches as refreshes, at least one.
	before := ms.lists.Load()
	for range 4 {
		wg.Go(func() { _, _ = e.client.Refresh(context.Background(), "web", Target{}) })
	}
	wg.Wait()
	if n := ms.lists.Load() - before; n < 1 || n > 4 {
		t.Errorf("4 concurrent refreshes made %d listings; want 1 to 4", n)
	}
}

func TestHTTPServerDown(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	ms.register(t, e.store, "web")
	ms.register(t, e.store, "other")
	ms.http.Close()
	ctx := context.Background()

	_, err := e.client.Tools(ctx, "web", Target{})
	var se *ServerError
	if !errors.As(err, &se) || se.ServerID != "web" {
		t.Fatalf("Tools of a server that is down: %v; want a *ServerError", err)
	}
	reached := e.net.n.Load()
	if _, err := e.client.Tools(ctx, "web", Target{}); err == nil {
		t.Fatal("second Tools: no error")
	}
	if e.net.n.Load() != reached {
		t.Errorf("a listing within FailureTTL of a failure reached the network")
	}
	if _, err := e.client.Refresh(ctx, "web", Target{}); err == nil || e.net.n.Load() == reached {
		t.Errorf("Refresh: %v, and the network was not tried; want a new attempt", err)
	}

	res, err := e.client.Call(ctx, "web__echo", json.RawMessage(`{"text":"x"}`), Target{})
	if err != nil {
		t.Fatalf("Call: %v; the run must go on with a result", err)
	}
	if !res.IsError || !strings.Contains(res.Text, `MCP server "web" is unreachable`) || !strings.Contains(res.Text, "the run goes on") {
		t.Errorf("Call: got %+v; want a result saying the server is unreachable", res)
	}

	// The errors quote the URL: a key in it stays hidden.
	if _, err := e.store.Put(ctx, Server{ID: "keyed", Name: "Keyed", Transport: TransportHTTP, URL: ms.http.URL + "/mcp?key=supersecret123",
		Enabled: true}); err != nil {
		t.Fatal(err)
	}
	res, err = e.client.Call(ctx, "keyed__echo", nil, Target{})
	_, lerr := e.client.Tools(ctx, "keyed", Target{})
	if err != nil || !res.IsError || strings.Contains(res.Text, "supersecret123") || lerr == nil || strings.Contains(lerr.Error(), "supersecret123") {
		t.Errorf("Call on a server with a key in its URL: %+v, %v, listing %v; want the key hidden", res, err, lerr)
	}

	all, err := e.client.ToolsOf(ctx, []string{"web", "other"}, Target{})
	if len(all) != 0 || err == nil || !strings.Contains(err.Error(), `"web"`) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("ToolsOf: %q, %v; want no tools and both servers named", names(all), err)
	}
}

func TestToolsOfSkipsFailingServers(t *testing.T) {
	up, down := newMCPServer(t), newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	up.register(t, e.store, "up")
	down.register(t, e.store, "down")
	down.http.Close()
	tools, err := e.client.ToolsOf(context.Background(), []string{"down", "up", "missing"}, Target{})
	if len(tools) != 5 || tools[0].ServerID != "up" {
		t.Errorf("ToolsOf: got %q; want up's 5 tools", names(tools))
	}
	if err == nil || !strings.Contains(err.Error(), `"down"`) || !errors.Is(err, ErrNotFound) {
		t.Errorf("ToolsOf: error %v; want down's failure and missing's ErrNotFound", err)
	}
}

func TestHTTPCallTimeout(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{CallTimeout: 300 * time.Millisecond})
	ms.register(t, e.store, "web")
	res, err := e.client.Call(context.Background(), "web__block", nil, Target{})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "no answer within 300ms") {
		t.Fatalf("Call of a tool that never answers: %+v, %v; want a result saying it did not answer", res, err)
	}

	// The caller's own end is the caller's to handle.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	res, err = e.client.Call(ctx, "web__block", nil, Target{})
	if !errors.Is(err, context.Canceled) || !res.IsError {
		t.Fatalf("cancelled Call: %+v, %v; want context.Canceled", res, err)
	}
}

func TestHTTPToolGoneOnTheServer(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	ms.register(t, e.store, "web")
	ctx := context.Background()
	if _, err := e.client.Tools(ctx, "web", Target{}); err != nil {
		t.Fatal(err)
	}
	ms.srv.RemoveTools("add")
	res, err := e.client.Call(ctx, "web__add", json.RawMessage(`{"a":1,"b":2}`), Target{})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "add") {
		t.Fatalf("Call of a tool the server dropped: %+v, %v; want a result saying so", res, err)
	}
}

func TestDisabledServer(t *testing.T) {
	ms := newMCPServer(t)
	e := newHTTPEnv(t, Config{})
	ctx := context.Background()
	if _, err := e.store.Put(ctx, Server{ID: "web", Name: "Web", Transport: TransportHTTP, URL: ms.http.URL, Token: testToken}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Tools(ctx, "web", Target{}); !errors.Is(err, ErrDisabled) {
		t.Errorf("Tools of a disabled server: %v; want an error saying so", err)
	}
	if res, err := e.client.Call(ctx, "web__echo", nil, Target{}); err != nil || !res.IsError || !strings.Contains(res.Text, "disabled") {
		t.Errorf("Call on a disabled server: %+v, %v; want a result saying so", res, err)
	}
	if ms.lists.Load() != 0 || e.net.n.Load() != 0 {
		t.Error("a disabled server was contacted")
	}
}

func TestNewNeedsServers(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without Servers: no error")
	}
}
