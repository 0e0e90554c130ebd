package web_test

// The OpenAPI document of /api/sandbox/v1 against the product: it is a
// valid document, it names exactly the routes the router serves, the
// engine serves it, and real answers of the engine match its schemas.
// Without these checks the document would drift from the server unseen,
// and clients generated from it would break.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/web/sandboxapi"
)

const sandboxPrefix = "/api/sandbox/v1"

// loadSandboxOpenAPI loads and validates the embedded document.
func loadSandboxOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(sandboxapi.OpenAPIDocument())
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	return doc
}

// operations lists the document's operations as "METHOD /path".
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

// anyMethods are the methods gin's Any registers: a path with all of
// them is a handler that sorts methods itself (the MCP endpoint), and is
// covered when the document describes some of them.
var anyMethods = []string{"GET", "POST", "PUT", "PATCH", "HEAD", "OPTIONS", "DELETE", "CONNECT", "TRACE"}

// sandboxRoutes lists the router's routes under /api/sandbox/v1 as
// "METHOD /path" in OpenAPI's notation ({id} for :id and *id), and the
// paths registered with Any.
func sandboxRoutes(h http.Handler) (routes map[string]bool, anyPaths map[string]bool) {
	routes, anyPaths = map[string]bool{}, map[string]bool{}
	methods := map[string][]string{}
	for _, rt := range web.Routes(h) {
		method, path, _ := strings.Cut(rt, " ")
		if path != sandboxPrefix && !strings.HasPrefix(path, sandboxPrefix+"/") {
			continue
		}
		segs := strings.Split(path, "/")
		for i, s := range segs {
			if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
				segs[i] = "{" + s[1:] + "}"
			}
		}
		path = strings.Join(segs, "/")
		routes[method+" "+path] = true
		methods[path] = append(methods[path], method)
	}
	for path, ms := range methods {
		if !slices.ContainsFunc(anyMethods, func(m string) bool { return !slices.Contains(ms, m) }) {
			anyPaths[path] = true
		}
	}
	return routes, anyPaths
}

func TestSandboxOpenAPI(t *testing.T) {
	doc := loadSandboxOpenAPI(t)
	ops := operations(doc)

	t.Run("operations", func(t *testing.T) {
		for key, op := range ops {
			if !strings.HasPrefix(strings.SplitN(key, " ", 2)[1], sandboxPrefix+"/") {
				t.Errorf("%s: not under %s", key, sandboxPrefix)
			}
			if op.OperationID == "" {
				t.Errorf("%s: no operationId", key)
			}
			if op.Summary == "" {
				t.Errorf("%s: no summary", key)
			}
			var errs []string
			for status := range op.Responses.Map() {
				if status == "default" || strings.HasPrefix(status, "4") || strings.HasPrefix(status, "5") {
					errs = append(errs, status)
				}
			}
			if len(errs) == 0 {
				t.Errorf("%s: no error response", key)
			}
		}
	})

	env := enginetest.Start(t, enginetest.Options{})

	t.Run("routes", func(t *testing.T) {
		routes, anyPaths := sandboxRoutes(env.Engine.Handler)
		if len(routes) == 0 {
			t.Fatalf("the router has no route under %s", sandboxPrefix)
		}
		for rt := range routes {
			path := strings.SplitN(rt, " ", 2)[1]
			if anyPaths[path] {
				continue
			}
			if ops[rt] == nil {
				t.Errorf("route %s is not in the document", rt)
			}
		}
		for key := range ops {
			path := strings.SplitN(key, " ", 2)[1]
			if !routes[key] && !anyPaths[path] {
				t.Errorf("the document's %s (%s) is not a route", key, ops[key].OperationID)
			}
		}
		for path := range anyPaths {
			if doc.Paths.Value(path) == nil {
				t.Errorf("route Any %s is not in the document", path)
			}
		}
	})

	t.Run("served", func(t *testing.T) {
		c := env.Anonymous()
		resp := c.Do(t, "GET", sandboxPrefix+"/openapi.json", nil)
		if resp.Status != http.StatusOK || !bytes.Equal(resp.Body, sandboxapi.OpenAPIDocument()) {
			t.Fatalf("GET %s/openapi.json without credentials: %d %s; want 200 with the embedded document", sandboxPrefix, resp.Status, clip(resp.Body))
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" || resp.Header.Get("Cache-Control") == "" {
			t.Fatalf("ETag %q, Cache-Control %q; want both, so clients cache the document", etag, resp.Header.Get("Cache-Control"))
		}
		c.Header.Set("If-None-Match", etag)
		if again := c.Do(t, "GET", sandboxPrefix+"/openapi.json", nil); again.Status != http.StatusNotModified {
			t.Errorf("GET with If-None-Match %s: %d, want 304", etag, again.Status)
		}
	})
}

// answerChecker validates the engine's answers against the document.
type answerChecker struct {
	doc  *openapi3.T
	opts *openapi3filter.Options
}

func newAnswerChecker(doc *openapi3.T) *answerChecker {
	return &answerChecker{doc: doc, opts: &openapi3filter.Options{
		IncludeResponseStatus:   true, // a status the document does not list is drift too
		MultiError:              true,
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()},
	}}
}

// route is the document's operation for a method and a path template.
func (a *answerChecker) route(t *testing.T, method, template string) *routers.Route {
	t.Helper()
	item := a.doc.Paths.Value(template)
	if item == nil || item.GetOperation(method) == nil {
		t.Fatalf("the document has no %s %s", method, template)
	}
	return &routers.Route{Spec: a.doc, Server: a.doc.Servers[0], Path: template, PathItem: item, Method: method, Operation: item.GetOperation(method)}
}

// input is the validation input of a request of the test: body is what
// Client.Do sends.
func (a *answerChecker) input(t *testing.T, method, template, path string, body any) *openapi3filter.RequestValidationInput {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, "http://engine"+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	params := map[string]string{}
	tsegs, psegs := strings.Split(template, "/"), strings.Split(req.URL.Path, "/")
	for i, s := range tsegs {
		if strings.HasPrefix(s, "{") && i < len(psegs) {
			params[strings.Trim(s, "{}")] = psegs[i]
		}
	}
	return &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: a.route(t, method, template), Options: a.opts}
}

// call sends a request, checks its status (and the error kind, for
// errors), and validates the answer, and the request when the engine
// took it, against the document.
func (a *answerChecker) call(t *testing.T, c *enginetest.Client, method, template, path string, body any, want int, kind string) enginetest.Response {
	t.Helper()
	resp := c.Do(t, method, path, body)
	if resp.Status != want {
		t.Fatalf("%s %s: %d %s; want %d", method, path, resp.Status, clip(resp.Body), want)
	}
	in := a.input(t, method, template, path, body)
	if want < 300 {
		if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil {
			t.Errorf("%s %s: the document refuses a request the engine took: %v", method, path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.Status, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(resp.Body)), Options: a.opts}
	if err := openapi3filter.ValidateResponse(t.Context(), out); err != nil {
		t.Errorf("%s %s: the answer does not match the document: %v\nbody: %s", method, path, err, clip(resp.Body))
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		a.undocumented(t, method+" "+path, a.responseSchema(t, in.Route, resp), resp.Body)
	}
	if kind != "" {
		var e struct{ Error string }
		_ = json.Unmarshal(resp.Body, &e)
		if e.Error != kind {
			t.Errorf("%s %s: error %q, want %q (%s)", method, path, e.Error, kind, clip(resp.Body))
		}
	}
	return resp
}

func (a *answerChecker) responseSchema(t *testing.T, route *routers.Route, resp enginetest.Response) *openapi3.Schema {
	t.Helper()
	r := route.Operation.Responses.Status(resp.Status)
	if r == nil || r.Value == nil {
		return nil
	}
	mt := r.Value.Content.Get(resp.Header.Get("Content-Type"))
	if mt == nil || mt.Schema == nil {
		return nil
	}
	return mt.Schema.Value
}

// undocumented reports the fields of an answer its schema does not
// name: the schemas leave objects open, as clients must accept new
// fields, so validation alone would not see them.
func (a *answerChecker) undocumented(t *testing.T, what string, schema *openapi3.Schema, body []byte) {
	t.Helper()
	var v any
	if schema == nil || json.Unmarshal(body, &v) != nil {
		return
	}
	for _, f := range extraFields(schema, v, "") {
		t.Errorf("%s: the answer's field %s is not in the document", what, f)
	}
}

func extraFields(s *openapi3.Schema, v any, at string) []string {
	if s == nil {
		return nil
	}
	props := map[string]*openapi3.Schema{}
	var subs []*openapi3.Schema
	for _, r := range s.AllOf {
		subs = append(subs, r.Value)
	}
	for _, r := range s.AnyOf {
		// Only the alternatives the value matches describe it.
		if r.Value.VisitJSON(v) == nil {
			subs = append(subs, r.Value)
		}
	}
	for _, r := range s.OneOf {
		if r.Value.VisitJSON(v) == nil {
			subs = append(subs, r.Value)
		}
	}
	closed := len(s.Properties) > 0
	for name, r := range s.Properties {
		props[name] = r.Value
	}
	for _, sub := range subs {
		if len(sub.Properties) > 0 {
			closed = true
		}
		for name, r := range sub.Properties {
			if props[name] == nil {
				props[name] = r.Value
			}
		}
	}
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for name, fv := range v {
			ps, ok := props[name]
			if !ok {
				if closed {
					out = append(out, at+"."+name)
				}
				continue
			}
			out = append(out, extraFields(ps, fv, at+"."+name)...)
		}
	case []any:
		if s.Items != nil {
			for i, iv := range v {
				out = append(out, extraFields(s.Items.Value, iv, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestSandboxOpenAPIAnswers sends the engine a session's life through
// the API with a real key and validates every answer, errors included,
// against the document.
func TestSandboxOpenAPIAnswers(t *testing.T) {
	doc := loadSandboxOpenAPI(t)
	env := enginetest.Start(t, enginetest.Options{})
	a := newAnswerChecker(doc)
	erin := env.CreateUser(t, "erin", auth.RoleUser)
	key := env.Bearer(env.APIKey(t, erin))
	browser := env.Login(t, "erin", enginetest.Password("erin"))
	noCSRF := *browser
	noCSRF.CSRF = ""
	other := env.Bearer(env.APIKey(t, env.CreateUser(t, "gail", auth.RoleUser)))

	var created struct{ ID string }
	a.call(t, key, "POST", sandboxPrefix+"/sessions", sandboxPrefix+"/sessions",
		map[string]any{"name": "openapi", "labels": map[string]string{"team": "data"}, "idleTimeoutSeconds": 300}, 201, "").JSON(t, &created)
	if created.ID == "" {
		t.Fatal("the new session has no id")
	}
	id := created.ID
	session := sandboxPrefix + "/sessions/{id}"
	execute := session + "/execute"
	files := session + "/files"
	at := func(template string) string { return strings.Replace(template, "{id}", url.PathEscape(id), 1) }
	shell := func(cmd string) map[string]any {
		return map[string]any{"tool": "shell:exec", "params": map[string]any{"command": cmd}}
	}
	rows := []struct {
		name           string
		c              *enginetest.Client
		method, tmpl   string
		path           string // the template's path with its query, when not at(tmpl)
		body           any
		status         int
		kind           string
		resultContains string // in an execute's text
	}{
		{name: "document", c: env.Anonymous(), method: "GET", tmpl: sandboxPrefix + "/openapi.json", status: 200},
		{name: "tools", c: key, method: "GET", tmpl: sandboxPrefix + "/tools", status: 200},
		{name: "get", c: key, method: "GET", tmpl: session, status: 200},
		{name: "list by label", c: key, method: "GET", tmpl: sandboxPrefix + "/sessions", path: sandboxPrefix + "/sessions?label=team=data", status: 200},
		{name: "echo", c: key, method: "POST", tmpl: execute, body: shell("echo hi"), status: 200, resultContains: "hi"},
		{name: "failing command", c: key, method: "POST", tmpl: execute, body: shell("echo oops >&2; exit 3"), status: 200},
		{name: "file:write", c: key, method: "POST", tmpl: execute, body: map[string]any{"tool": "file:write", "params": map[string]any{"path": "notes/a.txt", "content": "hello"}}, status: 200},
		{name: "file:read", c: key, method: "POST", tmpl: execute, body: map[string]any{"tool": "file:read", "params": map[string]any{"path": "/workspace/notes/a.txt"}}, status: 200, resultContains: "hello"},
		{name: "file:list", c: key, method: "POST", tmpl: execute, body: map[string]any{"tool": "file:list", "params": map[string]any{"path": "/workspace/notes"}}, status: 200},
		{name: "skill:list", c: key, method: "POST", tmpl: execute, body: map[string]any{"tool": "skill:list"}, status: 200},
		{name: "upload", c: key, method: "PUT", tmpl: files, path: at(files) + "?path=/workspace/data/in.csv", body: []byte("a,b\n1,2\n"), status: 201},
		{name: "download", c: key, method: "GET", tmpl: files, path: at(files) + "?path=/workspace/data/in.csv", status: 200},
		{name: "download a directory", c: key, method: "GET", tmpl: files, path: at(files) + "?path=/workspace/data", status: 200},
		{name: "temporary", c: key, method: "POST", tmpl: sandboxPrefix + "/execute", body: map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "echo once"}, "session": map[string]any{"name": "once"}}, status: 200, resultContains: "once"},
		{name: "warmup", c: key, method: "POST", tmpl: sandboxPrefix + "/warmup", body: map[string]any{"count": 1, "name": "warm"}, status: 201},
		{name: "browser", c: browser, method: "GET", tmpl: session, status: 200},
		// Errors.
		{name: "no credentials", c: env.Anonymous(), method: "GET", tmpl: sandboxPrefix + "/sessions", status: 401, kind: "unauthorized"},
		{name: "MCP without credentials", c: env.Anonymous(), method: "POST", tmpl: session + "/mcp",
			body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, status: 401, kind: "unauthorized"},
		{name: "no CSRF token", c: &noCSRF, method: "POST", tmpl: sandboxPrefix + "/sessions", body: map[string]any{}, status: 403, kind: "forbidden"},
		{name: "bad JSON", c: key, method: "POST", tmpl: execute, body: []byte("{"), status: 400, kind: "bad_request"},
		{name: "no such tool", c: key, method: "POST", tmpl: execute, body: map[string]any{"tool": "shell:nope", "params": map[string]any{}}, status: 400, kind: "no_such_tool"},
		{name: "bad params", c: key, method: "POST", tmpl: execute, body: map[string]any{"tool": "shell:exec", "params": map[string]any{"command": 7}}, status: 400, kind: "bad_params"},
		{name: "bad limits", c: key, method: "POST", tmpl: sandboxPrefix + "/sessions", body: map[string]any{"limits": map[string]any{"memoryMiB": 1 << 30}}, status: 400, kind: "bad_request"},
		{name: "missing file", c: key, method: "GET", tmpl: files, path: at(files) + "?path=/workspace/no-such-file", status: 404, kind: "not_found"},
		{name: "missing session", c: key, method: "GET", tmpl: session, path: sandboxPrefix + "/sessions/ses_0123456789abcdef", status: 404, kind: "not_found"},
		{name: "another caller's session", c: other, method: "GET", tmpl: session, status: 404, kind: "not_found"},
		{name: "delete", c: key, method: "DELETE", tmpl: session, status: 202},
		{name: "deleted", c: key, method: "GET", tmpl: session, status: 404, kind: "not_found"},
		{name: "execute in a deleted session", c: key, method: "POST", tmpl: execute, body: shell("echo late"), status: 404, kind: "not_found"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			path := r.path
			if path == "" {
				path = at(r.tmpl)
			}
			resp := a.call(t, r.c, r.method, r.tmpl, path, r.body, r.status, r.kind)
			if r.resultContains != "" {
				var res struct{ Text string }
				resp.JSON(t, &res)
				if !strings.Contains(res.Text, r.resultContains) {
					t.Errorf("text %q, want it to contain %q", res.Text, r.resultContains)
				}
			}
		})
	}
}

// TestSandboxOpenAPIStream checks a streamed execute's events against
// the document's schemas: output events, then one result.
func TestSandboxOpenAPIStream(t *testing.T) {
	doc := loadSandboxOpenAPI(t)
	env := enginetest.Start(t, enginetest.Options{})
	a := newAnswerChecker(doc)
	key := env.Bearer(env.APIKey(t, env.CreateUser(t, "finn", auth.RoleUser)))
	var created struct{ ID string }
	a.call(t, key, "POST", sandboxPrefix+"/sessions", sandboxPrefix+"/sessions", map[string]any{}, 201, "").JSON(t, &created)

	resp, err := key.Send("POST", sandboxPrefix+"/sessions/"+url.PathEscape(created.ID)+"/execute",
		map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "echo one; echo two >&2"}, "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("streamed execute: %d %q %s; want 200 text/event-stream", resp.StatusCode, ct, clip(b))
	}
	schemas := map[string]*openapi3.Schema{
		"output": doc.Components.Schemas["OutputEvent"].Value,
		"result": doc.Components.Schemas["ExecuteResult"].Value,
		"error":  doc.Components.Schemas["Error"].Value,
	}
	events, err := readEvents(resp.Body)
	if err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	var names []string
	for _, ev := range events {
		names = append(names, ev.name)
		s := schemas[ev.name]
		if s == nil {
			t.Errorf("event %q is not in the document (data %s)", ev.name, ev.data)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Errorf("event %s: data %q is not JSON: %v", ev.name, ev.data, err)
			continue
		}
		if err := s.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.EnableFormatValidation(), openapi3.MultiErrors()); err != nil {
			t.Errorf("event %s: %s does not match the document: %v", ev.name, ev.data, err)
		}
		for _, f := range extraFields(s, v, "") {
			t.Errorf("event %s: field %s is not in the document", ev.name, f)
		}
	}
	if len(names) == 0 || names[len(names)-1] != "result" || slices.Contains(names[:len(names)-1], "result") {
		t.Errorf("events %v; want output events, then one result", names)
	}
	if !slices.Contains(names, "output") {
		t.Errorf("events %v; want output events as the command writes", names)
	}
}

type event struct{ name, data string }

// readEvents reads a Server-Sent Events stream to its end.
func readEvents(r io.Reader) ([]event, error) {
	var out []event
	var cur event
	var data []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 || cur.name != "" {
				cur.data = strings.Join(data, "\n")
				if cur.name == "" {
					cur.name = "message"
				}
				out = append(out, cur)
			}
			cur, data = event{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return out, sc.Err()
}
