// Package egress is the engine's egress proxy: the only way out of a
// sandbox, with an allowlist or with the full network. Each running
// sandbox gets a Unix socket of its own, bound into it read-only; inside,
// a forwarder (Forward, run by the agent or engine binary) listens on
// 127.0.0.1:3128 in the sandbox's own network namespace, which has no
// other interface than loopback, and copies each connection to that
// socket. HTTP_PROXY and HTTPS_PROXY point the sandbox's programs there.
//
// The proxy serves CONNECT (HTTPS and any TLS) and plain-HTTP requests in
// absolute form. It lets one through only when the host name matches the
// sandbox's allowlist and the port is allowed, resolves the name itself,
// refuses when any address it resolves to is private, loopback,
// link-local, multicast or otherwise not a public host, and dials the
// vetted address, never the name again, so a second DNS answer cannot
// redirect it. Every connection, allowed or refused, is reported to
// Config.Audit.
//
// A sandbox with the "full" network is served the same way (OpenPublic)
// with any host allowed: the public internet, never the engine's host or
// its networks, by construction, since the proxy is the only way out of
// the sandbox's network namespace and it dials only vetted addresses.
//
// It must never dial an IP literal a sandbox sent unless that sandbox has
// the full network and the address is public, never resolve a name it
// then refuses to vet, and never let configuration an operator or user
// can set reach private addresses: only Config.Resolve and
// Config.PermitAddr, which exist for tests, can.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Where the sandbox sees the proxy.
const (
	// ListenAddr is where the forwarder listens inside a sandbox.
	ListenAddr = "127.0.0.1:3128"
	// ProxyURL is what HTTP_PROXY and its kin say inside a sandbox.
	ProxyURL = "http://" + ListenAddr
	// SocketDir is where a sandbox sees its directory of the proxy's
	// socket (read-only), and SocketPath the socket itself.
	SocketDir  = "/run/flowbox"
	SocketName = "egress.sock"
	SocketPath = SocketDir + "/" + SocketName
)

// Env is the environment a sandbox's shell starts with when it has an
// allowlist: every common spelling of the proxy variables.
func Env() []string {
	return []string{
		"HTTP_PROXY=" + ProxyURL, "HTTPS_PROXY=" + ProxyURL,
		"http_proxy=" + ProxyURL, "https_proxy=" + ProxyURL,
		"ALL_PROXY=" + ProxyURL, "all_proxy=" + ProxyURL,
		"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1",
	}
}

// Decisions an Event records.
const (
	Allowed = "allowed"
	Refused = "refused"
	// Failed: allowed, but the name did not resolve or the dial failed.
	Failed = "failed"
)

// Event is one connection through the proxy, reported when it ends.
type Event struct {
	SandboxID string
	// Method is CONNECT, or the plain-HTTP request's method.
	Method string
	Host   string
	Port   int
	// Addr is the address dialed, when one was.
	Addr     string
	Decision string
	// Reason says why a connection was refused or failed.
	Reason string
	// BytesUp went from the sandbox to the server, BytesDown back.
	BytesUp, BytesDown int64
	Start              time.Time
	Duration           time.Duration
}

// Config configures a Proxy. Zero values have the defaults named.
type Config struct {
	// Audit receives every connection when it ends. It must not block
	// for long: the connection's goroutine calls it.
	Audit func(ctx context.Context, ev Event)
	// Ports are the ports a sandbox may reach. Default 80 and 443.
	Ports []int
	// DialTimeout bounds resolving and connecting. Default 10 seconds.
	DialTimeout time.Duration
	// MaxConns bounds one sandbox's open connections. Default 64.
	MaxConns int
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// Resolve replaces DNS resolution, for tests only; the product never
	// sets it. Default: the system resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// PermitAddr lets tests reach an address the proxy refuses (a test
	// server on loopback). The product never sets it.
	PermitAddr func(netip.Addr) bool
}

// Proxy serves the egress of every sandbox of this engine process.
type Proxy struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	listeners map[string]*listener // by sandbox ID
}

// New returns a proxy that serves nothing until Open.
func New(cfg Config) *Proxy {
	if len(cfg.Ports) == 0 {
		cfg.Ports = []int{80, 443}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			// The trailing dot makes the name absolute: no search domain
			// is tried.
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host+".")
		}
	}
	return &Proxy{cfg: cfg, log: cfg.Logger.With("component", "egress"), listeners: map[string]*listener{}}
}

// listener is one sandbox's socket.
type listener struct {
	id    string
	path  string
	ln    *net.UnixListener
	info  os.FileInfo
	allow atomic.Pointer[[]string]
	slots chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

// Open serves sandbox id's egress on a Unix socket at path with the
// allowlist allow (see ParsePatterns). It is idempotent: a sandbox
// already served at path only gets the new allowlist, and a socket that
// was removed or replaced meanwhile (by another engine process, say) is
// made again. The socket's directory is created, private to the engine
// apart from the socket itself.
func (p *Proxy) Open(id, path string, allow []string) error {
	patterns, err := ParsePatterns(allow)
	if err != nil {
		return err
	}
	if len(patterns) == 0 {
		return p.Close(id)
	}
	return p.open(id, path, patterns)
}

// OpenPublic serves sandbox id's egress as Open does, to any public host:
// the sandbox's "full" network. Every address is still vetted: loopback,
// private, CGNAT, link-local, multicast, ULA and reserved addresses are
// refused, whether a name resolves to them or the sandbox names them as
// an IP literal.
func (p *Proxy) OpenPublic(id, path string) error {
	return p.open(id, path, []string{anyPublicHost})
}

// Public reports whether sandbox id is served by OpenPublic.
func (p *Proxy) Public(id string) bool {
	return slices.Equal(p.Allowlist(id), []string{anyPublicHost})
}

// Restore serves sandbox id again at path with what Allowlist returned
// for it (an allowlist, or OpenPublic's): for undoing a Close.
func (p *Proxy) Restore(id, path string, allow []string) error {
	if slices.Equal(allow, []string{anyPublicHost}) {
		return p.OpenPublic(id, path)
	}
	return p.Open(id, path, allow)
}

// anyPublicHost is the allowlist of OpenPublic. ParsePatterns refuses it,
// so no allowlist an operator, an app or an API caller writes becomes it.
const anyPublicHost = "*"

func (p *Proxy) open(id, path string, patterns []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.listeners[id]; l != nil {
		fi, err := os.Lstat(path)
		if l.path == path && err == nil && os.SameFile(fi, l.info) {
			l.allow.Store(&patterns)
			return nil
		}
		l.close()
		delete(p.listeners, id)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("egress: create the socket's directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("egress: replace the old socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	ln.SetUnlinkOnClose(false) // Close removes it, if it is still ours
	// Whoever runs in the sandbox connects, whatever its user.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("egress: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return fmt.Errorf("egress: %w", err)
	}
	l := &listener{id: id, path: path, ln: ln, info: fi, slots: make(chan struct{}, p.cfg.MaxConns), conns: map[net.Conn]struct{}{}}
	l.allow.Store(&patterns)
	p.listeners[id] = l
	go p.accept(l)
	return nil
}

// Close stops serving sandbox id: its socket is removed and its open
// connections cut. Closing a sandbox not served is not an error.
func (p *Proxy) Close(id string) error {
	p.mu.Lock()
	l := p.listeners[id]
	delete(p.listeners, id)
	p.mu.Unlock()
	if l != nil {
		l.close()
	}
	return nil
}

// Shutdown closes every sandbox's socket.
func (p *Proxy) Shutdown() {
	p.mu.Lock()
	ls := p.listeners
	p.listeners = map[string]*listener{}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
}

// Allowlist returns what sandbox id may reach, nil when it is not served.
func (p *Proxy) Allowlist(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.listeners[id]; l != nil {
		return slices.Clone(*l.allow.Load())
	}
	return nil
}

func (l *listener) close() {
	l.mu.Lock()
	l.done = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	l.ln.Close()
	// Remove the socket only if it is still the one this listener made.
	if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.info) {
		os.Remove(l.path)
	}
	for c := range conns {
		c.Close()
	}
}

func (l *listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *listener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

func (p *Proxy) accept(l *listener) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Warn("egress: accept", "sandboxId", l.id, "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case l.slots <- struct{}{}:
		default:
			go func() {
				defer c.Close()
				ev := Event{SandboxID: l.id, Start: time.Now(), Decision: Refused, Reason: "too many open connections"}
				refuse(c, http.StatusServiceUnavailable, ev.Reason)
				p.audit(ev)
			}()
			continue
		}
		if !l.track(c) {
			c.Close()
			<-l.slots
			continue
		}
		go func() {
			defer func() { <-l.slots }()
			defer l.untrack(c)
			defer c.Close()
			p.serve(l, c)
		}()
	}
}

func (p *Proxy) audit(ev Event) {
	ev.Duration = time.Since(ev.Start)
	lvl := slog.LevelInfo
	if ev.Decision != Allowed {
		lvl = slog.LevelWarn
	}
	p.log.Log(context.Background(), lvl, "egress", "sandboxId", ev.SandboxID, "method", ev.Method, "host", ev.Host, "port", ev.Port,
		"decision", ev.Decision, "reason", ev.Reason, "bytesUp", ev.BytesUp, "bytesDown", ev.BytesDown, "duration", ev.Duration)
	if p.cfg.Audit != nil {
		p.cfg.Audit(context.Background(), ev)
	}
}

// headerTimeout bounds reading a request's head.
const headerTimeout = 10 * time.Second

// serve handles one connection: one CONNECT tunnel or one plain-HTTP
// request (the answer closes the connection).
func (p *Proxy) serve(l *listener, c net.Conn) {
	ev := Event{SandboxID: l.id, Start: time.Now()}
	defer func() { p.audit(ev) }()
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(headerTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		ev.Decision, ev.Reason = Refused, "malformed request: "+err.Error()
		refuse(c, http.StatusBadRequest, ev.Reason)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ev.Method = req.Method

	var hostport string
	switch {
	case req.Method == http.MethodConnect:
		hostport = req.Host
	case req.URL.IsAbs() && req.URL.Scheme == "http":
		hostport = req.URL.Host
		if req.URL.Port() == "" {
			hostport = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	default:
		ev.Decision, ev.Reason = Refused, "only CONNECT and absolute http:// requests go through this proxy"
		refuse(c, http.StatusBadRequest, ev.Reason)
		return
	}
	host, port, addr, status, why := p.vet(l, hostport)
	ev.Host, ev.Port = host, port
	if why != "" {
		ev.Decision, ev.Reason = Refused, why
		if status != http.StatusForbidden {
			ev.Decision = Failed
		}
		refuse(c, status, why)
		return
	}
	ev.Addr = addr.String()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", addr.String())
	cancel()
	if err != nil {
		ev.Decision, ev.Reason = Failed, "connect: "+err.Error()
		refuse(c, http.StatusBadGateway, ev.Reason)
		return
	}
	defer up.Close()
	ev.Decision = Allowed

	cu := &counter{r: br}
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	} else {
		// Origin form to the server, one request per connection.
		req.RequestURI = ""
		for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
			req.Header.Del(h)
		}
		req.Close = true
		w := &countWriter{w: up}
		if err := req.Write(w); err != nil {
			ev.BytesUp = w.n
			return
		}
		ev.BytesUp = w.n
	}
	down := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(c, up)
		// The server is done: end the sandbox's side too.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		down <- n
	}()
	if req.Method == http.MethodConnect {
		_, _ = io.Copy(up, cu)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		ev.BytesUp = cu.n
	}
	ev.BytesDown = <-down
}

// vet decides on hostport: the host name, its port and the address to
// dial, or the HTTP status and the reason to refuse.
func (p *Proxy) vet(l *listener, hostport string) (host string, port int, addr netip.AddrPort, status int, why string) {
	h, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, 0, addr, http.StatusForbidden, "not a host:port: " + hostport
	}
	host = strings.ToLower(h)
	port, err = strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65535 {
		return host, 0, addr, http.StatusForbidden, "bad port " + strconv.Quote(ps)
	}
	public := slices.Equal(*l.allow.Load(), []string{anyPublicHost})
	literal, litErr := netip.ParseAddr(strings.Trim(host, "[]"))
	switch {
	case public && litErr == nil && literal.Zone() == "":
		// An IP literal is allowed only to a sandbox with the full
		// network, and vetted below as a resolved name is.
	case checkName(host) != nil:
		return host, port, addr, http.StatusForbidden, host + " is not a host name: " + checkName(host).Error()
	case !Match(*l.allow.Load(), host):
		return host, port, addr, http.StatusForbidden, host + " is not on this sandbox's allowlist"
	}
	if !slices.Contains(p.cfg.Ports, port) {
		return host, port, addr, http.StatusForbidden, "port " + ps + " is not allowed (allowed: " + portList(p.cfg.Ports) + ")"
	}
	addrs := []netip.Addr{literal}
	if litErr != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DialTimeout)
		addrs, err = p.cfg.Resolve(ctx, host)
		cancel()
		if err != nil || len(addrs) == 0 {
			return host, port, addr, http.StatusBadGateway, "cannot resolve " + host
		}
	}
	// Every address must be public: a name that also points inside is
	// refused, not dialed at its public half.
	for _, a := range addrs {
		if p.cfg.PermitAddr != nil && p.cfg.PermitAddr(a.Unmap()) {
			continue
		}
		if reason := publicAddr(a); reason != "" {
			return host, port, addr, http.StatusForbidden, host + " resolves to " + reason
		}
	}
	return host, port, netip.AddrPortFrom(addrs[0].Unmap(), uint16(port)), 0, ""
}

func portList(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// refuse answers the sandbox with status and why, and closes.
func refuse(c net.Conn, status int, why string) {
	body := "flowbox egress proxy: " + why + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
