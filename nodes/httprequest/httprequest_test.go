package httprequest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/httprequest"
)

func engine(t *testing.T, allow string, cfg httprequest.Config) *nodes.Engine {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Outbound, err = outbound.ParseAllow(allow); err != nil {
		t.Fatal(err)
	}
	types := nodes.Builtins(nil)
	types[httprequest.Type] = httprequest.New(cfg)
	return &nodes.Engine{Templates: ts, Types: types}
}

// graph is start → http → answer "ok: <answer>", the http node's catch
// branch leading to "caught: {{$http.error$}}" when catch.
func graph(t *testing.T, inputs map[string]any, outputs, answer string, catch bool) *nodes.Graph {
	t.Helper()
	raw, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	if outputs == "" {
		outputs = "[]"
	}
	ns := `{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"http","type":"httpRequest468","name":"HTTP","inputs":` + string(raw) + `,"outputs":` + outputs + `},
		{"nodeId":"ok","type":"answerNode","inputs":{"text":` + mustJSON(t, "ok: "+answer) + `}}`
	edges := `{"source":"start","target":"http"},{"source":"http","target":"ok"}`
	if catch {
		ns += `,{"nodeId":"caught","type":"answerNode","inputs":{"text":"caught: {{$http.error$}}"}}`
		edges += `,{"source":"http","target":"caught","sourceHandle":"catch"}`
	}
	js := `{"variables":[{"key":"token","type":"string"}],"nodes":[` + ns + `],"edges":[` + edges + `]}`
	var g nodes.Graph
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	if err := (&nodes.Engine{Templates: mustTemplates(t)}).Templates.Check(&g); err != nil {
		t.Fatalf("the test's graph is refused at save: %v", err)
	}
	return &g
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustTemplates(t *testing.T) nodes.Templates {
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// echo answers every request with what it received, and some data to
// pick outputs from.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.Query(), "auth": r.Header.Get("Authorization"),
		"contentType": r.Header.Get("Content-Type"), "body": string(body),
		"data": map[string]any{"user": map[string]any{"name": "Ada"}, "count": "3", "list": []any{"first", map[string]any{"id": 7}}},
	})
}

func TestHTTPRequest(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", echo)
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusNotFound) })
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain words") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 5000)) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// The test server is on loopback: the operator allows exactly it.
	e := engine(t, strings.TrimPrefix(srv.URL, "http://"), httprequest.Config{MaxResponseBytes: 4096})

	tests := []struct {
		name    string
		inputs  map[string]any
		outputs string
		answer  string // the answer node's text after "ok: "
		want    string // the whole answer; "caught: ..." pieces for failures
		caught  bool   // want is a piece of the caught error
	}{
		{name: "GET with parameters, headers and picked outputs",
			inputs: map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": srv.URL + "/echo/{{item}}",
				"system_httpHeader": []any{map[string]any{"key": "Authorization", "value": "Bearer {{token}}"}},
				"system_httpParams": []any{map[string]any{"key": "q", "value": "{{$VARIABLE_NODE_ID.token$}} and more"}, map[string]any{"key": "n", "value": "{{n}}"}},
				"item":              "{{$start.userChatInput$}}", "n": 2,
				"outputPaths": map[string]any{"name": "data.user.name", "second": "$.data.list[1].id", "count": "data.count"}},
			outputs: `[{"key":"name","type":"string"},{"key":"second","type":"number"},{"key":"count","type":"number"},{"key":"method","type":"string"},{"key":"auth","type":"string"},{"key":"query","type":"object"},{"key":"path","type":"string"}]`,
			answer:  "{{$http.method$}} {{$http.path$}} {{$http.query$}} {{$http.auth$}} {{$http.name$}} {{$http.second$}} {{$http.count$}}",
			want:    `ok: GET /echo/hi {"n":["2"],"q":["s3cret and more"]} Bearer s3cret Ada 7 3`},
		{name: "POST body with variables and references",
			inputs: map[string]any{"system_httpReqUrl": srv.URL + "/echo/post",
				"system_httpJsonBody": `{"q": "{{q}}", "n": {{n}}, "list": {{list}}, "asked": "{{$start.userChatInput$}}"}`,
				"q":                   "say \"hi\"\nthen {{leave}} me", "n": 1.5, "list": []any{1, "two"}},
			outputs: `[{"key":"body","type":"string"},{"key":"contentType","type":"string"}]`,
			answer:  "{{$http.contentType$}} {{$http.body$}}",
			want:    `ok: application/json {"q": "say \"hi\"\nthen {{leave}} me", "n": 1.5, "list": [1,"two"], "asked": "hi"}`},
		{name: "text answer", inputs: map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": srv.URL + "/text"},
			answer: "{{$http.httpRawResponse$}}", want: "ok: plain words"},
		{name: "not 2xx takes the catch branch", inputs: map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": srv.URL + "/missing"},
			want: "404 Not Found: nope", caught: true},
		{name: "answer too long", inputs: map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": srv.URL + "/big"},
			want: "longer than 4 KiB", caught: true},
		{name: "timeout", inputs: map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": srv.URL + "/slow", "system_httpTimeout": 1},
			want: "gave no complete answer within 1s", caught: true},
		{name: "body not JSON", inputs: map[string]any{"system_httpReqUrl": srv.URL + "/echo/x", "system_httpJsonBody": `{"q": {{q}}}`, "q": "bare text"},
			want: "the body is not JSON", caught: true},
		{name: "node reference in a header", inputs: map[string]any{"system_httpReqUrl": srv.URL + "/echo/x",
			"system_httpHeader": []any{map[string]any{"key": "Authorization", "value": "Bearer {{$start.userChatInput$}}"}}},
			outputs: `[{"key":"auth","type":"string"}]`, answer: "{{$http.auth$}}", want: "ok: Bearer hi"},
		{name: "not http", inputs: map[string]any{"system_httpReqUrl": "file:///etc/passwd"}, want: "not an http:// or https:// address", caught: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.Run(context.Background(), graph(t, tc.inputs, tc.outputs, tc.answer, true),
				nodes.Chat{AppID: "a", UserID: "u", ChatID: "c", Question: "hi", Variables: map[string]any{"token": "s3cret"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.caught {
				if !strings.HasPrefix(res.Answer, "caught: ") || !strings.Contains(res.Answer, tc.want) {
					t.Fatalf("answer = %q, want the catch branch with %q", res.Answer, tc.want)
				}
				return
			}
			if res.Answer != tc.want {
				t.Fatalf("answer = %q (failed %q, responses %+v)\nwant %q", res.Answer, res.Failed, res.Responses, tc.want)
			}
		})
	}
}

// TestHTTPDetailMasksSecrets: the run's record of the request does not
// keep secret headers.
func TestHTTPDetailMasksSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echo))
	defer srv.Close()
	e := engine(t, strings.TrimPrefix(srv.URL, "http://"), httprequest.Config{})
	res, err := e.Run(context.Background(), graph(t, map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": srv.URL + "/x",
		"system_httpHeader": []any{map[string]any{"key": "Authorization", "value": "Bearer {{token}}"}, map[string]any{"key": "X-Trace", "value": "t1"}}},
		"", "done", true), nodes.Chat{AppID: "a", UserID: "u", ChatID: "c", Variables: map[string]any{"token": "s3cret"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var d *httprequest.Detail
	for _, r := range res.Responses {
		if r.NodeID == "http" {
			d, _ = r.Detail.(*httprequest.Detail)
		}
	}
	if d == nil || d.Status != 200 || d.Headers["Authorization"] != "***" || d.Headers["X-Trace"] != "t1" || strings.Contains(fmt.Sprint(d), "s3cret") {
		t.Fatalf("detail = %+v; want status 200, Authorization masked and no secret in it", d)
	}
}

// TestHTTPRefusesInternalAddresses is an attack test: a builder (or a
// chat user, through a reference) points the node at the engine's own
// networks, directly or through a redirect. Each must keep failing, with
// no request reaching the target and no resolved address in the message.
func TestHTTPRefusesInternalAddresses(t *testing.T) {
	var hits atomic.Int64
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"secret":"internal"}`)
	}))
	defer inside.Close()
	port := inside.URL[strings.LastIndex(inside.URL, ":")+1:]
	// An allowed server that redirects to the internal one, and to the
	// cloud metadata address.
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	defer redirector.Close()
	e := engine(t, strings.TrimPrefix(redirector.URL, "http://"), httprequest.Config{})

	for _, target := range []string{
		inside.URL + "/",
		"http://localhost:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://0.0.0.0:" + port + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		redirector.URL + "/?to=" + inside.URL + "/",
		redirector.URL + "/?to=http://169.254.169.254/latest/meta-data/",
	} {
		t.Run(target, func(t *testing.T) {
			res, err := e.Run(context.Background(), graph(t, map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": target},
				"", "{{$http.httpRawResponse$}}", false), nodes.Chat{AppID: "a", UserID: "u", ChatID: "c"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "" || !strings.Contains(res.Failed, "was refused") {
				t.Fatalf("answer %q, failed %q: want the request refused", res.Answer, res.Failed)
			}
			if strings.Contains(target, "localhost") && strings.Contains(res.Failed, "127.0.0.1") {
				t.Errorf("the refusal %q tells which address the name resolved to", res.Failed)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests, want none", n)
	}
}
