package mcptool

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// The transports a server is reached through.
const (
	// TransportHTTP is MCP's streamable HTTP, from the engine.
	TransportHTTP = "http"
	// TransportStdio is a program speaking MCP on its standard input and
	// output, run inside the chat's sandbox.
	TransportStdio = "stdio"
)

// Masked stands for a secret in the public view of a server. Given back
// to Store.Update as a header value or as the token, it keeps the stored
// secret, so that an admin form built from the public view can be sent
// back unchanged.
const Masked = "•••"

// idPattern is a server id: a slug short enough to leave room for the
// tool's own name in the 64 characters a model's tool name may have.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Server is an MCP server an admin registered, as the store keeps it
// (its document in Collection). Headers and Token are secrets: they leave
// the engine only towards the server itself. Its JSON form is the public
// view (see Public), so that encoding a Server by mistake never leaks
// them.
type Server struct {
	// ID is a slug (^[a-z0-9][a-z0-9_-]{0,31}$, without "__") that
	// prefixes the names of the server's tools as the model sees them.
	ID   string `bson:"_id"`
	Name string `bson:"name"`
	// Transport is TransportHTTP or TransportStdio.
	Transport string `bson:"transport"`
	// URL is the streamable HTTP endpoint (http and https only).
	URL string `bson:"url,omitempty"`
	// Headers are sent with every request to URL.
	Headers map[string]string `bson:"headers,omitempty"`
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string `bson:"token,omitempty"`
	// Command is the argv of a stdio server, run inside the chat's
	// sandbox, never on the engine's host: a new process for each listing
	// and each call (see the package comment).
	Command []string `bson:"command,omitempty"`
	// Enabled: apps may use the server's tools.
	Enabled   bool      `bson:"enabled"`
	CreatedAt time.Time `bson:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt"`
}

// PublicServer is a server as admins and apps may read it back: header
// names without their values, whether there is a token, and the URL
// without a password.
type PublicServer struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Transport string            `json:"transport"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	HasToken  bool              `json:"hasToken"`
	Command   []string          `json:"command,omitempty"`
	Enabled   bool              `json:"enabled"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// Public is the server without its secrets.
func (s Server) Public() PublicServer {
	p := PublicServer{ID: s.ID, Name: s.Name, Transport: s.Transport, URL: redactURL(s.URL), HasToken: s.Token != "",
		Command: slices.Clone(s.Command), Enabled: s.Enabled, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if len(s.Headers) > 0 {
		p.Headers = make(map[string]string, len(s.Headers))
		for name := range s.Headers {
			p.Headers[name] = Masked
		}
	}
	return p
}

// MarshalJSON encodes the public view: secrets never leave through
// encoding/json.
func (s Server) MarshalJSON() ([]byte, error) { return json.Marshal(s.Public()) }

// redactURL hides a password in the URL's user information.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Redacted()
}

// scrub hides the server's secrets in a message meant for the model or
// the log: errors of HTTP clients quote the URL, whose query or user
// information may hold a key.
func scrub(srv Server, msg string) string {
	secrets := []string{srv.Token}
	for _, v := range srv.Headers {
		secrets = append(secrets, v)
	}
	if u, err := url.Parse(srv.URL); err == nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		secrets = append(secrets, u.RawQuery)
	}
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, Masked)
		}
	}
	return msg
}

// reservedHeaders are set by the MCP transport itself; a registered
// value would break the protocol or the bearer token.
var reservedHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// Validate says what is wrong with the server's settings, all problems
// at once, or nil.
func (s Server) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch {
	case !idPattern.MatchString(s.ID):
		add("id %q must be 1 to 32 lowercase letters, digits, '-' or '_', starting with a letter or digit", s.ID)
	case strings.Contains(s.ID, "__"):
		add("id %q must not contain \"__\": it separates the server's id from the tool's name", s.ID)
	}
	if strings.TrimSpace(s.Name) == "" {
		add("name is required")
	}
	switch s.Transport {
	case TransportHTTP:
		u, err := url.Parse(s.URL)
		switch {
		case err != nil:
			add("url: %v", err)
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			add("url %q must be an absolute http:// or https:// URL", s.URL)
		}
		if len(s.Command) > 0 {
			add("command is for stdio servers; an http server has a url")
		}
		for name, value := range s.Headers {
			canon := textproto.CanonicalMIMEHeaderKey(name)
			switch {
			case !validHeaderName(name):
				add("header name %q is not a valid HTTP header name", name)
			case slices.Contains(reservedHeaders, canon):
				add("header %s is set by the MCP transport itself and cannot be registered", canon)
			case canon == "Authorization" && s.Token != "":
				add("give either a token or an Authorization header, not both")
			}
			if strings.ContainsAny(value, "\r\n\x00") {
				add("header %s: the value must not contain line breaks", name)
			}
		}
		if strings.ContainsAny(s.Token, "\r\n\x00 ") {
			add("token must not contain spaces or line breaks")
		}
	case TransportStdio:
		if len(s.Command) == 0 || s.Command[0] == "" {
			add("command must name the program to run in the sandbox, e.g. [\"/workspace/mcp-server\"]")
		}
		for i, arg := range s.Command {
			if _, err := syntax.Quote(arg, syntax.LangPOSIX); err != nil {
				add("command element %d cannot be passed to a program: %v", i, err)
			}
		}
		if s.URL != "" || len(s.Headers) > 0 || s.Token != "" {
			add("url, headers and token are for http servers; a stdio server has a command")
		}
	default:
		add("transport %q must be %q or %q", s.Transport, TransportHTTP, TransportStdio)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
}

// validHeaderName reports whether name is an HTTP token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return http.CanonicalHeaderKey(name) != ""
}
