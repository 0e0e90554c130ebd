// Package preview serves preview links (L2, docs/WORKSPACE.md "Preview
// links"): /preview/{token}/... leads, through the sandbox's agent, to a
// TCP port a process of a chat's sandbox listens on, for HTTP and
// WebSocket alike. The sandbox keeps no network interface for it. A link
// to the workspace's files (chats/preview.Files) serves them instead, to
// read (files.go).
//
// The pages behind a link come from the agent's programs, which the
// engine does not trust: every answer carries a Content-Security-Policy
// sandbox, so that they run in an opaque origin and can read neither the
// engine's cookies nor its API as the person looking; the engine's own
// cookies are taken out of what is passed in, and what the program sets
// is dropped. A link that is not shared works for the chat's owner alone
// (see chats/preview): its path then carries a grant, "{token}~{grant}".
//
// It must never dial anything but the agent, and never pass a request on
// for a link it has not checked.
package preview

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/preview"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/visitor"
)

// Links is the part of preview.Store the proxy uses.
type Links interface {
	Find(ctx context.Context, token string) (preview.Link, error)
	NewGrant(ctx context.Context, l preview.Link) (string, error)
}

// Ports is the part of sandbox.Manager the proxy uses.
type Ports interface {
	DialPort(ctx context.Context, scope sandbox.Scope, port int) (net.Conn, error)
}

// Files is the part of sandbox.Manager that links to the workspace's
// files read with.
type Files interface {
	Files(ctx context.Context, scope sandbox.Scope, actor sandbox.Actor) (sandbox.Files, error)
}

// Handler serves /preview/{token}/...
type Handler struct {
	Links  Links
	Ports  Ports
	Files  Files
	Access api.ChatAccess
	Auth   api.Authenticator
	Log    *slog.Logger

	once  sync.Once
	proxy *httputil.ReverseProxy
}

// Policy is the Content-Security-Policy every answer carries: an opaque
// origin, in which scripts, forms, pop-ups and downloads still work.
const Policy = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// grantSep separates a token from a grant in the path; neither holds it.
const grantSep = "~"

type target struct {
	link preview.Link
	// prefix is the link's part of the path, "/preview/{token}...".
	prefix string
}

type targetKey struct{}

func (h *Handler) init() {
	h.once.Do(func() {
		tr := &http.Transport{
			// Each (sandbox, port) is a host of its own, so that kept
			// connections never cross links.
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				t, ok := ctx.Value(targetKey{}).(target)
				if !ok {
					return nil, errors.New("preview: a connection without its link")
				}
				return h.Ports.DialPort(ctx, t.link.Scope(), t.link.Port)
			},
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 5 * time.Minute,
			DisableCompression:    true,
		}
		h.proxy = &httputil.ReverseProxy{
			Transport:      tr,
			Rewrite:        rewrite,
			ModifyResponse: guard,
			ErrorHandler:   h.failed,
			FlushInterval:  -1,
		}
	})
}

// Serve serves a request for /preview/:token/*path.
func (h *Handler) Serve(c *gin.Context) {
	h.init()
	seg := c.Param("token")
	token, grant, _ := strings.Cut(seg, grantSep)
	ctx := c.Request.Context()
	link, err := h.Links.Find(ctx, token)
	switch {
	case errors.Is(err, preview.ErrNotFound):
		page(c, http.StatusNotFound, "No such preview link", "This preview link does not exist: it was revoked, its chat was deleted, or it was mistyped. Ask the chat for a new one.")
		return
	case errors.Is(err, preview.ErrExpired):
		page(c, http.StatusGone, "This preview link has expired", "Ask the chat's agent, or open the chat's Previews panel, for a new link.")
		return
	case err != nil:
		h.log().Error("preview: read link", "err", err)
		page(c, http.StatusServiceUnavailable, "The preview could not be opened", "The engine could not read its links. Retry in a moment.")
		return
	}
	rest := c.Param("path")
	if rest == "" {
		// The pages' relative links need the slash after the token.
		c.Redirect(http.StatusMovedPermanently, "/preview/"+seg+"/")
		return
	}
	if !link.Shared && !link.Granted(grant, time.Now()) {
		h.enter(c, link, rest)
		return
	}
	if link.Port == preview.Files {
		h.serveFile(c, link, "/preview/"+seg, rest)
		return
	}
	if c.Request.Method == http.MethodOptions && c.GetHeader("Origin") == "null" && c.GetHeader("Access-Control-Request-Method") != "" {
		preflight(c)
		return
	}
	r := c.Request.WithContext(context.WithValue(ctx, targetKey{}, target{link: link, prefix: "/preview/" + seg}))
	r.URL.Path = rest
	r.URL.RawPath = ""
	h.proxy.ServeHTTP(c.Writer, r)
}

// enter sends the chat's owner, signed in, on to the link with a grant;
// anyone else learns that the link is not shared.
func (h *Handler) enter(c *gin.Context, link preview.Link, rest string) {
	notShared := func() {
		page(c, http.StatusForbidden, "This preview link is not shared",
			"It opens for the chat's owner, signed in to Flowbox, alone. Sign in as its owner and open the link again, or ask the owner to share it.")
	}
	if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
		notShared()
		return
	}
	if err := api.Identify(c, h.Auth, false); err != nil {
		notShared()
		return
	}
	p, ok := api.PrincipalOf(c)
	if !ok {
		notShared()
		return
	}
	owner, err := h.Access.ChatOwner(c.Request.Context(), p, link.AppID, link.UserID, link.ChatID, false)
	if err != nil || owner != link.UserID {
		notShared()
		return
	}
	grant, err := h.Links.NewGrant(c.Request.Context(), link)
	if err != nil {
		h.log().Error("preview: grant", "err", err)
		page(c, http.StatusServiceUnavailable, "The preview could not be opened", "The engine could not record your access. Retry in a moment.")
		return
	}
	to := "/preview/" + link.Token() + grantSep + grant + rest
	if q := c.Request.URL.RawQuery; q != "" {
		to += "?" + q
	}
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, to)
}

// rewrite makes the request the program sees: to localhost at the
// link's port, without the engine's cookies and credentials.
func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(target)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = t.link.Key
	pr.Out.Host = "localhost:" + strconv.Itoa(t.link.Port)
	pr.Out.Header.Del("Authorization")
	pr.Out.Header.Del(api.CSRFHeader)
	if cookies := pr.In.Cookies(); len(cookies) > 0 {
		pr.Out.Header.Del("Cookie")
		for _, ck := range cookies {
			if ck.Name != api.SessionCookie && ck.Name != visitor.Cookie {
				pr.Out.AddCookie(ck)
			}
		}
	}
	pr.SetXForwarded()
	pr.Out.Header.Set("X-Forwarded-Prefix", t.prefix)
}

// guard keeps the program's answer in its sandbox: an opaque origin, no
// cookie on the engine's host, no referrer that carries the token.
func guard(res *http.Response) error {
	res.Header.Add("Content-Security-Policy", Policy)
	res.Header.Del("Set-Cookie")
	res.Header.Set("Referrer-Policy", "no-referrer")
	res.Header.Set("X-Content-Type-Options", "nosniff")
	if res.Request != nil && res.Request.Header.Get("Origin") == "null" {
		// The page's own requests come from its opaque origin.
		res.Header.Set("Access-Control-Allow-Origin", "*")
	}
	return nil
}

// preflight answers a CORS preflight of the page's own requests, which
// its opaque origin makes cross-origin.
func preflight(c *gin.Context) {
	c.Header("Access-Control-Allow-Origin", "*")
	c.Header("Access-Control-Allow-Methods", c.GetHeader("Access-Control-Request-Method"))
	if h := c.GetHeader("Access-Control-Request-Headers"); h != "" {
		c.Header("Access-Control-Allow-Headers", h)
	}
	c.Header("Access-Control-Max-Age", "600")
	c.Status(http.StatusNoContent)
}

// failed answers a request the program could not be reached for.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(target)
	port := strconv.Itoa(t.link.Port)
	var limit *sandbox.LimitError
	switch {
	case errors.Is(err, sandbox.ErrPortClosed):
		writePage(w, http.StatusBadGateway, "Nothing listens on port "+port+" yet",
			"No program in this chat's sandbox listens on port "+port+". Ask the agent to start the server (for example as a background process), then reload this page. A sandbox that was stopped for being idle has been started again, but the servers it ran ended when it stopped.")
	case errors.Is(err, sandbox.ErrDeleted), errors.Is(err, sandbox.ErrNotFound):
		writePage(w, http.StatusNotFound, "This chat's sandbox is gone", "The chat or its app was deleted.")
	case errors.As(err, &limit):
		writePage(w, http.StatusServiceUnavailable, "The sandbox could not be started", limit.Error()+". Retry later.")
	case errors.Is(err, context.Canceled):
		w.WriteHeader(499)
	default:
		h.log().Warn("preview: the sandbox's port could not be reached", "port", t.link.Port, "sandboxId", t.link.Scope().SandboxID(), "err", err)
		writePage(w, http.StatusBadGateway, "The preview could not be reached",
			"The program on port "+port+" of this chat's sandbox did not answer, or the sandbox could not be reached. Retry in a moment.")
	}
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#1f2933}h1{font-size:1.3rem}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

func page(c *gin.Context, status int, title, text string) { writePage(c.Writer, status, title, text) }

func writePage(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	if err := pageTmpl.Execute(w, struct{ Title, Text string }{title, text}); err != nil {
		fmt.Fprintln(w, title)
	}
}
