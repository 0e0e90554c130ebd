package visitor

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/web/api"
)

// Identity hooks are called for anonymous visitors, so each call is
// bounded twice: per client address (one address cannot make the engine
// call a hook in a loop) and per link (many addresses cannot either).
const (
	HookBurstPerAddress = 10
	HookEveryPerAddress = 6 * time.Second // 10 a minute after the burst
	HookBurstPerLink    = 60
	HookEveryPerLink    = time.Second // 60 a minute after the burst
)

// hookFailedMessage is all a visitor learns of a hook that failed: what
// it answered, or why it could not be reached, tells about the network
// behind the engine (the request may have been aimed there).
const hookFailedMessage = "The identity service could not be reached; the app's owner can see the details in the engine log."

// hookAllowed takes one identity-hook call from the client's and the
// link's budgets, or answers 429 and returns false.
func (h *Handler) hookAllowed(c *gin.Context, link share.Link) bool {
	lim := h.HookLimits
	if lim == nil {
		lim = defaultHookLimits
	}
	if ok, wait := lim.AllowAt("ip:"+c.ClientIP(), HookEveryPerAddress, HookBurstPerAddress); !ok {
		tooManyPage(c, wait, "identity checks from your address")
		return false
	}
	if ok, wait := lim.AllowAt("link:"+link.ID, HookEveryPerLink, HookBurstPerLink); !ok {
		tooManyPage(c, wait, "identity checks of this link")
		return false
	}
	return true
}

// defaultHookLimits serves handlers built without HookLimits.
var defaultHookLimits = &api.RateLimiter{}

// tooManyPage answers a page's 429.
func tooManyPage(c *gin.Context, wait time.Duration, what string) {
	c.Header("Retry-After", fmt.Sprint(int(wait.Seconds()+0.999)))
	shareError(c, false, http.StatusTooManyRequests, fmt.Sprintf("Too many %s; retry in %s.", what, wait.Round(time.Second)))
}

// hookFailed answers a visitor whose token the hook refused or could
// not check, and logs the detail for the app's owner.
func (h *Handler) hookFailed(c *gin.Context, link share.Link, err error) {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("share link: identity hook", "link", link.ID, "app", link.AppID, "client", c.ClientIP(), "err", err)
	if errors.Is(err, share.ErrHookRefused) {
		shareError(c, false, http.StatusForbidden, "The site that shared this link did not accept your token. Open the link again from the site that shared it.")
		return
	}
	shareError(c, false, http.StatusBadGateway, hookFailedMessage)
}

var switchPage = template.Must(template.New("switch").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{{.Name}}</title>
<link rel="stylesheet" href="/static/app.css"></head>
<body><main class="switch-identity">
<h1>{{.Name}}</h1>
<p>You are already chatting as a visitor of this link. The address you opened carries another identity.
Switch to it? Your current chats stay with your current identity.</p>
<form method="post" action="{{.Base}}/switch">
<input type="hidden" name="token" value="{{.Token}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" id="switch-identity">Switch</button> <a href="{{.Base}}" id="keep-identity">Keep</a>
</form></main></body></html>`))

// askSwitch answers a share link opened with a token by a browser that
// already has a visitor session: a page that asks before the session is
// replaced. The switch is a POST carrying the current session's CSRF
// token, so a page elsewhere cannot make it.
func (h *Handler) askSwitch(c *gin.Context, link share.Link, v share.Visitor, token string) {
	c.Header("Cache-Control", "no-store")
	c.Header("X-Frame-Options", "DENY")
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(http.StatusOK)
	if err := switchPage.Execute(c.Writer, map[string]string{"Name": link.Name, "Base": link.URL(), "Token": token, "CSRF": v.CSRF}); err != nil {
		_ = c.Error(err)
	}
	c.Abort()
}

// Switch serves POST /share/{id}/switch (after Gate): the visitor chose
// to replace their session with the identity of the token.
func (h *Handler) Switch(c *gin.Context) {
	link, _ := api.LinkOf(c)
	csrf, _ := c.Get(api.CSRFKey)
	want, _ := csrf.(string)
	if err := http.NewCrossOriginProtection().Check(c.Request); err != nil {
		shareError(c, false, http.StatusForbidden, "This switch came from another site; open the share link again and choose there.")
		return
	}
	if got := c.PostForm("csrf"); want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		shareError(c, false, http.StatusForbidden, "This switch does not come from your visitor session's page; open the share link again.")
		return
	}
	if link.HookURL == "" {
		shareError(c, false, http.StatusBadRequest, "This share link has no identity hook: there is no identity to switch to.")
		return
	}
	if !h.welcome(c, link, c.PostForm("token")) {
		return
	}
	c.Redirect(http.StatusSeeOther, link.URL())
}
