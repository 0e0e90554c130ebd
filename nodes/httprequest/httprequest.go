// Package httprequest is the HTTP request node (type "httpRequest468",
// FastGPT's): it calls a URL the app's builder wrote, with headers, query
// parameters and a JSON body filled in from the run, and gives the answer
// as httpRawResponse and as the outputs the builder picks from it by key
// path.
//
// The URL is the builder's (or, through references, the chat user's), so
// every request goes through the engine's outbound client
// (internal/outbound), which refuses loopback, private, link-local and
// cloud-metadata addresses, redirects included, unless the operator
// allows them. This package must never send a request through any other
// client, nor tell the requester which address a refused name resolved
// to. Answers are read up to a bound, and every request has a bounded
// timeout.
package httprequest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/nodes"
)

// Type is the node type's name, FastGPT's.
const Type = "httpRequest468"

// The node's own inputs, FastGPT's keys (and outputPaths, ours); every
// other input is a custom one, a variable the URL, headers, parameters
// and body use as {{name}}.
const (
	inputMethod      = "system_httpMethod"
	inputURL         = "system_httpReqUrl"
	inputHeaders     = "system_httpHeader"
	inputParams      = "system_httpParams"
	inputBody        = "system_httpJsonBody"
	inputTimeout     = "system_httpTimeout"
	inputOutputPaths = "outputPaths"
)

var ownInputs = map[string]bool{inputMethod: true, inputURL: true, inputHeaders: true, inputParams: true,
	inputBody: true, inputTimeout: true, inputOutputPaths: true}

// Defaults of Config.
const (
	DefaultMaxResponseBytes = 2 << 20
	DefaultMaxTimeout       = 300 * time.Second
	DefaultRedirects        = 5
	// DefaultTimeout is a request's timeout when the node gives none.
	DefaultTimeout = 30 * time.Second
)

// Config configures the node type. Zero values take the defaults above.
type Config struct {
	// Outbound is the operator's exceptions to the outbound client's
	// refusals (FLOWBOX_OUTBOUND_ALLOW); the zero value allows none.
	Outbound outbound.Allow
	// MaxResponseBytes bounds the answer the node reads; a longer one
	// fails the node.
	MaxResponseBytes int64
	// MaxTimeout bounds the timeout a node may ask for.
	MaxTimeout time.Duration
	// Redirects is how many redirects a request follows, each checked
	// like the first request.
	Redirects int
}

// Node is the HTTP request node type.
type Node struct {
	cfg    Config
	client *http.Client
}

var _ nodes.NodeType = (*Node)(nil)

// New returns the node type, with its outbound client.
func New(cfg Config) *Node {
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.Redirects <= 0 {
		cfg.Redirects = DefaultRedirects
	}
	return &Node{cfg: cfg, client: cfg.Outbound.Client(outbound.Options{Redirects: cfg.Redirects})}
}

// Detail is the node's NodeResponse.Detail: the request as sent (secret
// headers masked) and the answer's status.
type Detail struct {
	Method     string            `json:"method"`
	URL        string            `json:"url"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body,omitempty"`
	Status     int               `json:"status,omitempty"`
	DurationMs int64             `json:"durationMs"`
}

// Run sends the request and gives the answer: httpRawResponse (JSON when
// the answer is JSON, else its text) and the declared outputs picked from
// it. A refused address, a failed connection, a timeout, an answer that
// is not 2xx or too long fails the node.
func (n *Node) Run(ctx context.Context, run *nodes.NodeRun) (map[string]any, error) {
	vars := variables(run)
	method := strings.ToUpper(strings.TrimSpace(nodes.StringInput(run.Inputs, inputMethod)))
	if method == "" {
		method = http.MethodPost
	}
	target, err := n.target(run, vars)
	if err != nil {
		return nil, err
	}
	header, err := pairs(run, inputHeaders, vars)
	if err != nil {
		return nil, err
	}
	detail := &Detail{Method: method, URL: target.String(), Headers: map[string]string{}}
	run.Detail = detail
	h := http.Header{}
	for _, p := range header {
		if !httpguts.ValidHeaderFieldName(p.key) {
			return nil, fmt.Errorf("header name %q is not valid in HTTP; use letters, digits and - only", p.key)
		}
		if !httpguts.ValidHeaderFieldValue(p.value) {
			return nil, fmt.Errorf("the value of header %s holds a line break or a control character, which HTTP does not allow", p.key)
		}
		h.Add(p.key, p.value)
		detail.Headers[p.key] = masked(p.key, p.value)
	}
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		text := strings.TrimSpace(fill(nodes.StringInput(run.Inputs, inputBody), vars, true))
		if text != "" {
			if !json.Valid([]byte(text)) {
				var v any
				err := json.Unmarshal([]byte(text), &v)
				return nil, fmt.Errorf("the body is not JSON once its variables are filled in (%v): %s; quote text variables (\"{{name}}\")", err, clip(text, 300))
			}
			body, detail.Body = strings.NewReader(text), clip(text, 4096)
			if h.Get("Content-Type") == "" {
				h.Set("Content-Type", "application/json")
			}
		}
	}
	timeout := DefaultTimeout
	if s := nodes.IntInput(run.Inputs, inputTimeout); s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	timeout = min(timeout, n.cfg.MaxTimeout)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, target.String(), body)
	if err != nil {
		return nil, fmt.Errorf("the request cannot be made: %w", err)
	}
	req.Header = h
	start := time.Now()
	resp, err := n.client.Do(req)
	if err != nil {
		detail.DurationMs = time.Since(start).Milliseconds()
		return nil, requestError(ctx, err, target.Host, timeout)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, n.cfg.MaxResponseBytes+1))
	detail.Status, detail.DurationMs = resp.StatusCode, time.Since(start).Milliseconds()
	if err != nil {
		return nil, requestError(ctx, err, target.Host, timeout)
	}
	if int64(len(data)) > n.cfg.MaxResponseBytes {
		return nil, fmt.Errorf("the answer of %s is longer than %d KiB, the most this node reads; ask the server for less", target.Host, n.cfg.MaxResponseBytes>>10)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("%s answered %s", target.Host, resp.Status)
		if t := strings.TrimSpace(strings.ToValidUTF8(string(data), "")); t != "" {
			msg += ": " + clip(t, 500)
		}
		return nil, errors.New(msg)
	}
	raw := decode(data, resp.Header.Get("Content-Type"))
	out := map[string]any{"httpRawResponse": raw}
	paths, _ := run.Inputs[inputOutputPaths].(map[string]any)
	for _, o := range run.Node.Outputs {
		path := o.Key
		if p, ok := paths[o.Key].(string); ok && strings.TrimSpace(p) != "" {
			path = p
		}
		if v, ok := lookup(raw, path); ok {
			out[o.Key] = format(v, o.Type)
		}
	}
	return out, nil
}

// target is the URL with its variables filled in and the query
// parameters added.
func (n *Node) target(run *nodes.NodeRun, vars map[string]any) (*url.URL, error) {
	raw := strings.TrimSpace(fill(nodes.StringInput(run.Inputs, inputURL), vars, false))
	if raw == "" {
		return nil, errors.New("the URL is empty; give the address to call")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("the URL %s is not valid: %w", clip(raw, 200), errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("the URL %s is not an http:// or https:// address", clip(raw, 200))
	}
	params, err := pairs(run, inputParams, vars)
	if err != nil {
		return nil, err
	}
	if len(params) > 0 {
		q := u.Query()
		for _, p := range params {
			q.Add(p.key, p.value)
		}
		u.RawQuery = q.Encode()
	}
	return u, nil
}

type pair struct{ key, value string }

// pairs reads a list of {key, value} (the headers, the query parameters)
// with their variables filled in; items without a key are left out.
func pairs(run *nodes.NodeRun, input string, vars map[string]any) ([]pair, error) {
	items, _ := run.Inputs[input].([]any)
	var out []pair
	for _, it := range items {
		m, _ := it.(map[string]any)
		key := strings.TrimSpace(fill(nodes.Text(m["key"]), vars, false))
		if key == "" {
			continue
		}
		value := fill(nodes.Text(m["value"]), vars, false)
		if ref := nodeRefRe.FindString(key + value); ref != "" {
			what := "header"
			if input == inputParams {
				what = "query parameter"
			}
			return nil, fmt.Errorf("the %s %s holds %s after the references were filled in (a referenced value brought it in), which is not filled in again: check the value it references",
				what, key, ref)
		}
		out = append(out, pair{key, value})
	}
	return out, nil
}

// nodeRefRe finds a reference to a node's output ({{$node.key$}}) left
// in a header or parameter after the engine resolved the inputs: text a
// referenced value brought in, which is not filled in again.
var nodeRefRe = regexp.MustCompile(`\{\{\$[A-Za-z0-9_-]+\.[A-Za-z0-9_]+\$\}\}`)

// variables are what {{name}} may name, as in FastGPT: the global and
// system variables, then the node's custom inputs.
func variables(run *nodes.NodeRun) map[string]any {
	out := map[string]any{}
	for k, v := range run.Variables {
		out[k] = v
	}
	for k, v := range run.Inputs {
		if !ownInputs[k] {
			out[k] = v
		}
	}
	return out
}

// varRe finds {{name}} and {{$VARIABLE_NODE_ID.name$}} (the engine does
// not resolve references nested in a list).
var varRe = regexp.MustCompile(`\{\{(?:([A-Za-z_][A-Za-z0-9_]*)|\$` + nodes.VariablesNode + `\.([A-Za-z0-9_]+)\$)\}\}`)

// fill replaces the known variables in s. In JSON (the body) a value is
// written as JSON, a text's quotes left out, so that "{{name}}" stays a
// valid string whatever the text holds; elsewhere a text is itself and
// other values are JSON. Unknown names stay as they are.
func fill(s string, vars map[string]any, inJSON bool) string {
	return varRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRe.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		v, ok := vars[name]
		if !ok {
			return m
		}
		if str, isText := v.(string); isText && !inJSON {
			return str
		}
		b, err := json.Marshal(v)
		if err != nil {
			return m
		}
		if _, isText := v.(string); isText {
			return string(b[1 : len(b)-1])
		}
		return string(b)
	})
}

// requestError says why the request got no answer, without the address a
// refused name resolved to (T7).
func requestError(ctx context.Context, err error, host string, timeout time.Duration) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case outbound.Refused(err):
		return fmt.Errorf("the request to %s was refused: it, or a redirect it followed, leads to an address inside the engine's own networks "+
			"(loopback, private, link-local or cloud metadata), which this engine does not call unless the operator allows it (FLOWBOX_OUTBOUND_ALLOW)", host)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s gave no complete answer within %s; raise the node's timeout or try again", host, timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("the request to %s failed: %v", host, err)
}

// decode is the answer as JSON when it is JSON, else as text.
func decode(data []byte, contentType string) any {
	t := bytes.TrimSpace(data)
	if strings.Contains(strings.ToLower(contentType), "json") || len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		var v any
		if json.Unmarshal(t, &v) == nil {
			return v
		}
	}
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// secretHeader matches the names of headers whose values the run's
// record masks.
var secretHeader = regexp.MustCompile(`(?i)auth|token|secret|key|cookie|password|signature`)

func masked(name, value string) string {
	if secretHeader.MatchString(name) {
		return "***"
	}
	return value
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// lookup is the value at path in v, FastGPT's key paths: "data.user.name",
// "list[1].name", "list.1.name", with an optional leading "$." (JSONPath's
// root). ok is false when nothing is there.
func lookup(v any, path string) (any, bool) {
	path = strings.TrimSpace(path)
	path = strings.TrimPrefix(strings.TrimPrefix(path, "$"), ".")
	if path == "" {
		return v, true
	}
	for _, seg := range segments(path) {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// segments splits "a.b[0].c" into a, b, 0, c.
func segments(path string) []string {
	var out []string
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				out = append(out, part)
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			j := strings.IndexByte(part[i:], ']')
			if j < 0 {
				out = append(out, part[i:])
				break
			}
			out = append(out, strings.Trim(part[i+1:i+j], `"'`))
			part = part[i+j+1:]
		}
	}
	return out
}

// format gives v the declared type of an output where it can, as FastGPT
// does: a value for a text output becomes its JSON text, a numeric or
// boolean text its number or truth value, JSON text for an object or
// array output its value. Anything else stays as it is.
func format(v any, typ string) any {
	switch typ {
	case "string":
		if _, ok := v.(string); !ok && v != nil {
			return nodes.Text(v)
		}
	case "number":
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f
			}
		}
	case "boolean":
		if s, ok := v.(string); ok {
			if b, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
				return b
			}
		}
	case "object", "array":
		if s, ok := v.(string); ok {
			var parsed any
			if json.Unmarshal([]byte(s), &parsed) == nil {
				_, isObj := parsed.(map[string]any)
				_, isArr := parsed.([]any)
				if typ == "object" && isObj || typ == "array" && isArr {
					return parsed
				}
			}
		}
	}
	return v
}
