package admin

import (
	"bytes"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// OfflineDashboard serves the queue dashboard's pages without what they
// would fetch from the internet: its page links two stylesheets of Google
// Fonts (Roboto, whose place the page's own "Helvetica, Arial,
// sans-serif" takes, and Material Icons, which it does not use), and a
// web app manifest that the browser requests without cookies, so the
// admin gate answered it 401. The stylesheets go, and the manifest is
// requested with the admin's credentials. Everything else passes through.
func OfflineDashboard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		buf := &htmlBuffer{ResponseWriter: w}
		next.ServeHTTP(buf, r)
		buf.flush()
	})
}

var (
	remoteStylesheet = regexp.MustCompile(`<link rel="stylesheet" href="https://[^"]*"/?>`)
	manifestLink     = `<link rel="manifest" `
)

// htmlBuffer holds back an HTML answer to rewrite it; any other answer
// goes straight through.
type htmlBuffer struct {
	http.ResponseWriter
	status  int
	html    bool
	decided bool
	body    bytes.Buffer
}

func (b *htmlBuffer) WriteHeader(status int) {
	if b.decided {
		return
	}
	b.decided, b.status = true, status
	b.html = strings.HasPrefix(b.Header().Get("Content-Type"), "text/html")
	if !b.html {
		b.ResponseWriter.WriteHeader(status)
	}
}

func (b *htmlBuffer) Write(p []byte) (int, error) {
	if !b.decided {
		if b.Header().Get("Content-Type") == "" {
			b.Header().Set("Content-Type", http.DetectContentType(p))
		}
		b.WriteHeader(http.StatusOK)
	}
	if !b.html {
		return b.ResponseWriter.Write(p)
	}
	return b.body.Write(p)
}

// flush writes the held-back HTML, rewritten.
func (b *htmlBuffer) flush() {
	if !b.html {
		return
	}
	page := remoteStylesheet.ReplaceAll(b.body.Bytes(), nil)
	page = bytes.ReplaceAll(page, []byte(manifestLink), []byte(manifestLink+`crossorigin="use-credentials" `))
	b.Header().Set("Content-Length", strconv.Itoa(len(page)))
	b.ResponseWriter.WriteHeader(b.status)
	_, _ = b.ResponseWriter.Write(page)
}
