package workers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/kubernetes/kubetest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/workers"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// quiet drops the logs of the components under test; failures say
// enough.
var quiet = slog.New(slog.DiscardHandler)

func logger() *slog.Logger {
	if os.Getenv("FLOWBOX_TEST_LOG") != "" {
		return slog.Default()
	}
	return quiet
}

// clock is an injected clock tests move by hand; it starts at the real
// time so that providers' creation times compare with it.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

// waiter is an After that fires once the clock reaches at.
type waiter struct {
	at time.Time
	c  chan time.Time
}

func newClock() *clock { return &clock{now: time.Now().UTC().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// After fires when Add moves the clock d past now (sandbox.Clock).
func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := waiter{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.waiters = append(c.waiters, w)
	return w.c
}

// Waiting reports how many Afters wait for the clock to move.
func (c *clock) Waiting() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.waiters) }

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- c.now
	}
	c.waiters = kept
}

// redisKinds are the two Redis servers the workers run on: a real
// redis-server, and the in-process one the engine embeds.
var redisKinds = []struct {
	name  string
	start func(testing.TB, ...string) string
}{
	{"redis-server", redistest.Server},
	{"embedded", func(t testing.TB, _ ...string) string { return redistest.Embedded(t) }},
}

// forEachRedis runs fn as a subtest on each Redis.
func forEachRedis(t *testing.T, fn func(t *testing.T, addr string)) {
	for _, r := range redisKinds {
		t.Run(r.name, func(t *testing.T) { fn(t, r.start(t)) })
	}
}

func bwrapProvider(t testing.TB) sandbox.Provider {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	return p
}

// dockerProvider is the docker provider on the test daemon, seeing only
// the containers of this test: the daemon is shared with other tests,
// whose containers have no record here and would be taken for orphans.
func dockerProvider(t testing.TB, appPrefix string) sandbox.Provider {
	t.Helper()
	return scoped{Provider: dockertest.Provider(t, docker.Config{}), appPrefix: appPrefix}
}

type scoped struct {
	sandbox.Provider
	appPrefix string
}

func (s scoped) List(ctx context.Context) ([]sandbox.Resource, error) {
	all, err := s.Provider.List(ctx)
	var mine []sandbox.Resource
	for _, r := range all {
		if strings.HasPrefix(r.Labels["appId"], s.appPrefix) {
			mine = append(mine, r)
		}
	}
	return mine, err
}

// providers are the real providers each lifecycle test runs on.
var providers = []struct {
	name string
	new  func(t testing.TB, appPrefix string) sandbox.Provider
}{
	{"bwrap", func(t testing.TB, _ string) sandbox.Provider { return bwrapProvider(t) }},
	{"docker", dockerProvider},
	// Each test's provider has a namespace of its own: List sees only
	// the test's sandboxes.
	{"kubernetes", func(t testing.TB, _ string) sandbox.Provider { return kubetest.Provider(t, nil) }},
}

// env is one engine's worth of components on a private database and a
// given Redis.
type env struct {
	db       *mongo.Database
	store    *mongostore.Store
	activity *activity.Index // the stop scan's candidates, as on the embedded database
	provider sandbox.Provider
	manager  *sandbox.Manager
	clock    *clock
	redis    *redis.Client
	app      string // an app id unique to the test
}

var appSeq atomic.Int64

func newEnv(t *testing.T, p sandbox.Provider, redisAddr string) *env {
	t.Helper()
	db := mongotest.DB(t)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	idx := activity.New(rdb, db.Name())
	store, err := mongostore.New(context.Background(), db, quiet, mongostore.WithActivity(idx))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, store: store, activity: idx, provider: p, clock: newClock(), app: appID(t), redis: rdb}
	e.manager = e.newManager(t, p)
	return e
}

// appID is unique to the test and the run, and starts with the prefix
// dockerProvider scopes by.
func appID(t testing.TB) string {
	return fmt.Sprintf("%s-%d-%d", appPrefix(t), os.Getpid(), appSeq.Add(1))
}

func appPrefix(t testing.TB) string {
	return "wt-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
}

func (e *env) newManager(t testing.TB, p sandbox.Provider) *sandbox.Manager {
	t.Helper()
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: e.store, Now: e.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// workers returns workers on the env's components, with fast polling and
// retries; change adjusts the config.
func (e *env) workers(t *testing.T, change func(*workers.Config)) (*workers.Workers, *workers.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics := workers.NewMetrics(reg)
	cfg := workers.Config{
		Manager: e.manager, Store: e.store, Redis: e.redis, Metrics: metrics,
		PollInterval: 20 * time.Millisecond,
		RetryDelay:   func(int, error, *asynq.Task) time.Duration { return 10 * time.Millisecond },
		// The schedules fire often; the injected clock decides the period.
		ScanSchedule: "@every 1h", ReconcileSchedule: "@every 1h",
		ShutdownTimeout: 10 * time.Second,
		Now:             e.clock.Now, Logger: logger(),
	}
	if change != nil {
		change(&cfg)
	}
	w, err := workers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w, metrics, reg
}

// start runs w's server and scheduler until the test ends.
func start(t *testing.T, w *workers.Workers) {
	t.Helper()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func (e *env) scope(chat string) sandbox.Scope {
	return sandbox.Scope{AppID: e.app, UserID: "user-1", ChatID: chat}
}

// use runs a command in the chat's sandbox, creating it, and checks that
// it worked.
func (e *env) use(t *testing.T, chat string) string {
	t.Helper()
	res, err := e.manager.Exec(ctx(t), e.scope(chat), sandbox.ExecRequest{Command: "echo " + chat + " > mark; cat mark"})
	if err != nil || res.ExitCode != 0 || res.Stdout != chat+"\n" {
		t.Fatalf("command in chat %s: %+v, %v; want exit 0 and %q", chat, res, err, chat+"\n")
	}
	id := e.scope(chat).SandboxID()
	t.Cleanup(func() { _ = e.provider.Delete(context.Background(), id) })
	return id
}

func (e *env) record(t *testing.T, id string) (sandbox.Instance, bool) {
	t.Helper()
	inst, err := e.store.Get(context.Background(), e.provider.Name(), id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return inst, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return inst, true
}

func (e *env) providerStatus(t *testing.T, id string) sandbox.Status {
	t.Helper()
	st, err := e.provider.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (e *env) count(t *testing.T, coll string, filter bson.D) int64 {
	t.Helper()
	if filter == nil {
		filter = bson.D{}
	}
	n, err := e.db.Collection(coll).CountDocuments(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond until it holds or a minute passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric reads a counter, or a histogram's count, from reg: the one named
// name whose labels include labels (name, value pairs).
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
