package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Limits are a sandbox's resources; zero fields take the operator's.
type Limits struct {
	CPUCount  float64 `json:"cpuCount,omitempty"`
	MemoryMiB int64   `json:"memoryMiB,omitempty"`
	Pids      int64   `json:"pids,omitempty"`
}

// The networks a session may have.
const (
	NetworkNone   = "none"
	NetworkEgress = "egress" // the hosts of Egress only
	// NetworkFull is what every session of an engine whose operator
	// gives sandboxes the network has; it cannot be asked for.
	NetworkFull = "full"
)

// SessionOptions are what CreateSession, Warmup and ExecuteOnce ask for;
// every field is optional.
type SessionOptions struct {
	Name string
	// AppID runs the session under that app's policy (an app the caller
	// may use); app keys always use their app.
	AppID  string
	Limits *Limits
	// Network is NetworkNone (the default) or NetworkEgress, with Egress
	// the host patterns the operator's allowlist covers.
	Network string
	Egress  []string
	// IdleTimeout stops the sandbox after that long unused (60s to 24h,
	// whole seconds; 0: the engine's default, 5 minutes).
	IdleTimeout time.Duration
	Labels      map[string]string
	// Start makes the sandbox at once instead of on the first call.
	Start bool
	// FromSnapshot starts the sandbox as a copy of a snapshot of another
	// of the caller's sessions, which goes on untouched; CreateSession
	// only (Warmup and ExecuteOnce refuse it). A snapshot the caller does
	// not have is ErrNotFound.
	FromSnapshot *SnapshotRef
}

// sessionFields are the create fields as the API reads them.
type sessionFields struct {
	Name               string            `json:"name,omitempty"`
	AppID              string            `json:"appId,omitempty"`
	Limits             *Limits           `json:"limits,omitempty"`
	Network            string            `json:"network,omitempty"`
	Egress             []string          `json:"egress,omitempty"`
	IdleTimeoutSeconds int64             `json:"idleTimeoutSeconds,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	Start              bool              `json:"start,omitempty"`
	FromSnapshot       *SnapshotRef      `json:"fromSnapshot,omitempty"`
}

func (o SessionOptions) wire() sessionFields {
	return sessionFields{
		Name: o.Name, AppID: o.AppID, Limits: o.Limits, Network: o.Network, Egress: o.Egress,
		IdleTimeoutSeconds: int64(o.IdleTimeout / time.Second), Labels: o.Labels, Start: o.Start,
		FromSnapshot: o.FromSnapshot,
	}
}

// The states of a session's sandbox.
const (
	StatusNone    = "none" // not made yet: the first call makes it
	StatusRunning = "running"
	StatusStopped = "stopped" // idle; the next call starts it again
)

// Session is a sandbox with an owner.
type Session struct {
	ID          string
	Name        string
	AppID       string
	Labels      map[string]string
	Limits      Limits
	Network     string
	Egress      []string
	IdleTimeout time.Duration
	CreatedAt   time.Time
	// Status is StatusNone, StatusRunning or StatusStopped.
	Status       string
	LastActiveAt time.Time
}

// wireSession is a session as the API answers it.
type wireSession struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	AppID              string            `json:"appId"`
	Labels             map[string]string `json:"labels"`
	Limits             Limits            `json:"limits"`
	Network            string            `json:"network"`
	Egress             []string          `json:"egress"`
	IdleTimeoutSeconds int64             `json:"idleTimeoutSeconds"`
	CreatedAt          time.Time         `json:"createdAt"`
	Status             string            `json:"status"`
	LastActiveAt       time.Time         `json:"lastActiveAt"`
}

func (w wireSession) session() Session {
	return Session{
		ID: w.ID, Name: w.Name, AppID: w.AppID, Labels: w.Labels, Limits: w.Limits, Network: w.Network, Egress: w.Egress,
		IdleTimeout: time.Duration(w.IdleTimeoutSeconds) * time.Second, CreatedAt: w.CreatedAt,
		Status: w.Status, LastActiveAt: w.LastActiveAt,
	}
}

type sessionList struct {
	Sessions []wireSession `json:"sessions"`
}

func (l sessionList) sessions() []Session {
	out := make([]Session, len(l.Sessions))
	for i, w := range l.Sessions {
		out[i] = w.session()
	}
	return out
}

// CreateSession makes a session. Without opts.Start its sandbox is made
// on its first call; with opts.FromSnapshot it has that snapshot's files
// and shell state.
func (c *Client) CreateSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	var w wireSession
	if err := c.sendJSON(ctx, http.MethodPost, "/sessions", opts.wire(), &w); err != nil {
		return nil, err
	}
	s := w.session()
	return &s, nil
}

// Session returns one of the caller's sessions; another caller's answers
// ErrNotFound, as a missing one does.
func (c *Client) Session(ctx context.Context, id string) (*Session, error) {
	var w wireSession
	if err := c.getJSON(ctx, sessionPath(id, ""), nil, &w); err != nil {
		return nil, err
	}
	s := w.session()
	return &s, nil
}

// Sessions lists the caller's sessions, newest first, keeping those with
// every label given as "key=value".
func (c *Client) Sessions(ctx context.Context, labels ...string) ([]Session, error) {
	var q url.Values
	if len(labels) > 0 {
		q = url.Values{"label": labels}
	}
	var l sessionList
	if err := c.getJSON(ctx, "/sessions", q, &l); err != nil {
		return nil, err
	}
	return l.sessions(), nil
}

// DeleteSession deletes a session. The deletion is recorded when it
// returns; the sandbox and its files go shortly after. Retried after an
// answer lost on the way, it reports ErrNotFound for the session it did
// delete.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.sendJSON(ctx, http.MethodDelete, sessionPath(id, ""), nil, nil)
}

// Warmup makes and starts count sessions (1 to 10) ahead of their first
// call, so that it does not wait for a sandbox.
func (c *Client) Warmup(ctx context.Context, count int, opts SessionOptions) ([]Session, error) {
	if err := noSnapshot("Warmup", opts); err != nil {
		return nil, err
	}
	body := struct {
		Count int `json:"count"`
		sessionFields
	}{count, opts.wire()}
	var l sessionList
	if err := c.sendJSON(ctx, http.MethodPost, "/warmup", body, &l); err != nil {
		return nil, err
	}
	return l.sessions(), nil
}
