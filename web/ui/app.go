package ui

import (
	"embed"
	"encoding/json"
	"html"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/web/api"
)

// The browser app (web/ui/app: TypeScript and React, built by Vite into
// app/dist). A checkout holds only dist/.keep: the Go build works without
// Node, and the pages of the app say how to build it until it is built
// (scripts/run and scripts/test build it first).
//
//go:embed all:app/dist
var appFS embed.FS

// AppFiles are the browser app's built files, served under /ui/.
func AppFiles() http.FileSystem {
	sub, _ := fs.Sub(appFS, "app/dist")
	return http.FS(sub)
}

// headMark is where the app's index.html takes what the engine tells the
// page: the session's CSRF token.
const headMark = "<!--flowbox:head-->"

// Flow is the workflow canvas of an app, for those who may edit it.
func (u *UI) Flow(c *gin.Context) {
	a, ok := u.app(c)
	if !ok {
		return
	}
	if !u.Access.CanEditApp(api.Caller(c), a) {
		c.String(http.StatusForbidden, "only the app's owner and admins may edit it")
		return
	}
	serveApp(c, http.StatusOK, "index.html", a.Name, nil)
}

// serveApp answers with one of the browser app's built pages (file in
// app/dist): the session's CSRF token and, when data is not nil, data as
// JSON in <script type="application/json" id="page-data">, which the CSP
// does not run. json.Marshal writes <, > and & as \u escapes, so nothing
// in the data can end the element it sits in.
func serveApp(c *gin.Context, status int, file, title string, data any) {
	index, err := appFS.ReadFile("app/dist/" + file)
	if err != nil {
		c.String(http.StatusServiceUnavailable, "This engine was built without its browser app: build it with scripts/run "+
			"(or npm ci && npm run build in web/ui/app), then build the engine again.")
		return
	}
	csrf, _ := c.Get(api.CSRFKey)
	token, _ := csrf.(string)
	head := `<meta name="csrf-token" content="` + html.EscapeString(token) + `">`
	if data != nil {
		js, err := json.Marshal(data)
		if err != nil {
			c.String(http.StatusInternalServerError, "could not draw the page; retry later")
			return
		}
		head += `<script type="application/json" id="page-data">` + string(js) + `</script>`
	}
	page := strings.Replace(string(index), headMark, head, 1)
	page = strings.Replace(page, `<html lang="en">`, `<html lang="`+Lang(c)+`">`, 1)
	if title != "" {
		page = strings.Replace(page, "<title>Flowbox</title>", "<title>"+html.EscapeString(title)+" · Flowbox</title>", 1)
	}
	c.Header("X-Content-Type-Options", "nosniff")
	style := "'self'"
	if file == "chat.html" {
		// The terminal (xterm.js) draws its theme and measures its
		// characters with <style> elements of its own making, which
		// carry no nonce. Scripts stay 'self' alone.
		style = "'self' 'unsafe-inline'"
	}
	c.Header("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src "+style+"; img-src 'self' data:; frame-ancestors 'none'")
	c.Data(status, "text/html; charset=utf-8", []byte(page))
}
