package workers_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/workers"
)

// TestDeleteChat: deleting a chat removes its sandbox and its record and
// touches nothing else; the chat's late command fails and creates nothing.
func TestDeleteChat(t *testing.T) {
	for _, pv := range providers {
		t.Run(pv.name, func(t *testing.T) {
			forEachRedis(t, func(t *testing.T, addr string) {
				e := newEnv(t, pv.new(t, appPrefix(t)), addr)
				data := &chatData{failures: 1}
				w, _, reg := e.workers(t, func(c *workers.Config) { c.ChatData = []workers.ChatData{data} })
				start(t, w)
				gone := e.use(t, "doomed")
				kept := []string{e.use(t, "kept")}
				other := e.scope("doomed") // same chat id, another app
				other.AppID += "-other"
				if _, err := e.manager.Exec(ctx(t), other, sandbox.ExecRequest{Command: "echo doomed > mark"}); err != nil {
					t.Fatal(err)
				}
				kept = append(kept, other.SandboxID())
				t.Cleanup(func() { _ = e.provider.Delete(context.Background(), other.SandboxID()) })
				// Chat ids are scoped per app and user: another user's
				// chat "doomed" of the same app is another chat.
				users := e.scope("doomed")
				users.UserID = "user-2"
				if _, err := e.manager.Exec(ctx(t), users, sandbox.ExecRequest{Command: "echo doomed > mark"}); err != nil {
					t.Fatal(err)
				}
				kept = append(kept, users.SandboxID())
				t.Cleanup(func() { _ = e.provider.Delete(context.Background(), users.SandboxID()) })

				if err := w.DeleteChats(ctx(t), []sandbox.Scope{e.scope("doomed")}); err != nil {
					t.Fatalf("DeleteChats: %v", err)
				}
				eventually(t, "the chat's record is deleted", func() bool { _, ok := e.record(t, gone); return !ok })
				if st := e.providerStatus(t, gone); st != sandbox.StatusMissing {
					t.Errorf("provider status of the deleted chat's sandbox = %q, want missing", st)
				}
				for _, id := range kept {
					if inst, ok := e.record(t, id); !ok || inst.Status != sandbox.StatusRunning {
						t.Errorf("record of another chat %s: %+v (exists %v), want it running", id, inst, ok)
					}
					if st := e.providerStatus(t, id); st != sandbox.StatusRunning {
						t.Errorf("provider status of another chat %s = %q, want running", id, st)
					}
				}
				res, err := e.manager.Exec(ctx(t), e.scope("kept"), sandbox.ExecRequest{Command: "cat mark"})
				if err != nil || res.Stdout != "kept\n" {
					t.Errorf("another chat's files after the delete: %+v, %v", res, err)
				}
				// The intent is marked done once the task's deletions are
				// counted, a moment after the record went.
				eventually(t, "the chat's deletion is done", func() bool {
					d, err := e.store.GetDeletion(ctx(t), mongostore.ChatDeletionKey(e.scope("doomed")))
					return err == nil && d.State == mongostore.DeletionDone
				})
				// What the chat kept elsewhere was deleted too, retried after
				// its first failure.
				if got := data.deleted(); len(got) != 2 || got[1] != e.app+"/doomed" {
					t.Errorf("chat data deletions %v, want a failed one and then %s/doomed", got, e.app)
				}
				if got := metric(t, reg, "flowbox_sandboxes_deleted_total"); got != 1 {
					t.Errorf("flowbox_sandboxes_deleted_total = %v, want 1", got)
				}

				// A late command of the deleted chat fails, and creates nothing.
				res, err = e.manager.Exec(ctx(t), e.scope("doomed"), sandbox.ExecRequest{Command: "echo back"})
				if !errors.Is(err, sandbox.ErrDeleted) || res.ExitCode != -1 {
					t.Errorf("late command of the deleted chat: %+v, %v; want exit -1 and ErrDeleted", res, err)
				}
				if _, ok := e.record(t, gone); ok {
					t.Error("the late command brought the record back")
				}
				if st := e.providerStatus(t, gone); st != sandbox.StatusMissing {
					t.Errorf("the late command brought the sandbox back: %q", st)
				}
			})
		})
	}
}

// TestDeleteApp: deleting an app with many sandboxes removes them all, in
// batches, and no other app's.
func TestDeleteApp(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		data := &chatData{}
		w, _, reg := e.workers(t, func(c *workers.Config) { c.AppBatch = 7; c.ChatData = []workers.ChatData{data} })
		start(t, w)
		const n = 25
		var ids []string
		for i := range n {
			ids = append(ids, e.use(t, fmt.Sprintf("chat-%02d", i)))
		}
		other := e.scope("chat-00")
		other.AppID += "-other"
		if _, err := e.manager.Exec(ctx(t), other, sandbox.ExecRequest{Command: "true"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.provider.Delete(context.Background(), other.SandboxID()) })

		if err := w.DeleteApp(ctx(t), e.app); err != nil {
			t.Fatalf("DeleteApp: %v", err)
		}
		eventually(t, "every record of the app is deleted", func() bool {
			return e.count(t, mongostore.Collection, bson.D{{Key: "appId", Value: e.app}}) == 0
		})
		for _, id := range ids {
			if st := e.providerStatus(t, id); st != sandbox.StatusMissing {
				t.Errorf("sandbox %s of the deleted app: %q, want missing", id, st)
			}
		}
		if st := e.providerStatus(t, other.SandboxID()); st != sandbox.StatusRunning {
			t.Errorf("the other app's sandbox: %q, want running", st)
		}
		eventually(t, "the app's deletion is done", func() bool {
			d, err := e.store.GetDeletion(ctx(t), mongostore.AppDeletionKey(e.app))
			return err == nil && d.State == mongostore.DeletionDone
		})
		if got := data.deleted(); !slices.Equal(got, []string{e.app + "/*"}) {
			t.Errorf("chat data deletions %v, want the app's", got)
		}
		// Counted once the task is done: a record goes just before its
		// deletion is counted.
		if got := metric(t, reg, "flowbox_sandboxes_deleted_total"); got != n {
			t.Errorf("flowbox_sandboxes_deleted_total = %v, want %d", got, n)
		}
		// A new chat of the deleted app cannot get a sandbox.
		if _, err := e.manager.Exec(ctx(t), e.scope("new-chat"), sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrDeleted) {
			t.Errorf("command in a new chat of the deleted app: %v, want ErrDeleted", err)
		}
	})
}

// faultyDelete wraps a real provider: Delete waits at gate (when set)
// and fails its first failures calls.
type faultyDelete struct {
	sandbox.Provider
	entered  chan struct{}
	gate     chan struct{}
	failures int
	mu       sync.Mutex
	calls    int
}

func (f *faultyDelete) Delete(ctx context.Context, id string) error {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if f.gate != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	if n <= f.failures {
		return fmt.Errorf("delete sandbox %s: injected failure %d: %w", id, n, sandbox.ErrUnavailable)
	}
	return f.Provider.Delete(ctx, id)
}

func (f *faultyDelete) Calls() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

// chatData records the deletions of what chats keep besides their
// sandboxes; its first failures calls fail.
type chatData struct {
	mu       sync.Mutex
	failures int
	calls    []string // "app/chat" or "app/*"
}

func (d *chatData) record(what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, what)
	if len(d.calls) <= d.failures {
		return fmt.Errorf("delete chat data %s: injected failure", what)
	}
	return nil
}

func (d *chatData) DeleteChats(_ context.Context, chats []sandbox.Scope) error {
	ids := make([]string, len(chats))
	for i, c := range chats {
		ids[i] = c.ChatID
	}
	return d.record(chats[0].AppID + "/" + strings.Join(ids, ","))
}

func (d *chatData) DeleteApp(_ context.Context, appID string) error { return d.record(appID + "/*") }

func (d *chatData) deleted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// TestDeleteReturnsFirst: the caller gets its answer once the intent is
// recorded, while the provider has not even started.
func TestDeleteReturnsFirst(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		p := &faultyDelete{Provider: bwrapProvider(t), entered: make(chan struct{}, 1), gate: make(chan struct{})}
		e := newEnv(t, p, addr)
		w, _, _ := e.workers(t, nil)
		start(t, w)
		id := e.use(t, "chat")

		if err := w.DeleteChats(ctx(t), []sandbox.Scope{e.scope("chat")}); err != nil {
			t.Fatal(err)
		}
		// Returned: the intent is durable, the sandbox untouched.
		d, err := e.store.GetDeletion(ctx(t), mongostore.ChatDeletionKey(e.scope("chat")))
		if err != nil || d.State != mongostore.DeletionPending {
			t.Fatalf("intent when DeleteChats returned: %+v, %v; want pending", d, err)
		}
		<-p.entered // the task now waits in the provider's Delete
		if st := e.providerStatus(t, id); st != sandbox.StatusRunning {
			t.Fatalf("sandbox while the provider's Delete waits: %q, want running", st)
		}
		close(p.gate)
		eventually(t, "the sandbox is deleted", func() bool {
			_, ok := e.record(t, id)
			return !ok && e.providerStatus(t, id) == sandbox.StatusMissing
		})
	})
}

// TestDeleteRetried: a provider failing twice makes the task retry, then
// succeed; one that keeps failing leaves the task archived, and
// reconciliation does not queue it again behind the operator's back.
func TestDeleteRetried(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		tests := []struct {
			name     string
			failures int
			archived bool
		}{
			{"fails twice", 2, false},
			{"keeps failing", 1000, true},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p := &faultyDelete{Provider: bwrapProvider(t), failures: tc.failures}
				e := newEnv(t, p, addr)
				w, _, reg := e.workers(t, nil)
				start(t, w)
				id := e.use(t, "chat")
				if err := w.DeleteChats(ctx(t), []sandbox.Scope{e.scope("chat")}); err != nil {
					t.Fatal(err)
				}
				if !tc.archived {
					eventually(t, "the sandbox is deleted", func() bool { _, ok := e.record(t, id); return !ok })
					if got, want := p.Calls(), tc.failures+1; got != want {
						t.Errorf("provider Delete called %d times, want %d", got, want)
					}
					if got := metric(t, reg, "flowbox_worker_tasks_failed_total", "type", workers.TypeDeleteChat); got != float64(tc.failures) {
						t.Errorf("failed delete_chat tasks = %v, want %d", got, tc.failures)
					}
					return
				}
				insp := asynq.NewInspectorFromRedisClient(e.redis)
				var archived []*asynq.TaskInfo
				eventually(t, "the task is archived", func() bool {
					archived, _ = insp.ListArchivedTasks(workers.QueueDeletions)
					return len(archived) == 1
				})
				if archived[0].Type != workers.TypeDeleteChat || archived[0].Retried != 20 {
					t.Errorf("archived task: type %s, retried %d; want %s after 20 retries", archived[0].Type, archived[0].Retried, workers.TypeDeleteChat)
				}
				if inst, ok := e.record(t, id); !ok || inst.Status != sandbox.StatusDeleting {
					t.Errorf("record after the failed deletion: %+v (exists %v); want it kept, deleting", inst, ok)
				}
				e.clock.Add(time.Hour)
				if err := w.HandleReconcile(ctx(t), asynq.NewTask(workers.TypeReconcile, nil)); err != nil {
					t.Fatal(err)
				}
				if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "requeued_deletion"); got != 0 {
					t.Errorf("reconciliation queued an archived deletion again (%v)", got)
				}
			})
		}
	})
}

// TestRedisFlushedAfterIntent: the queue loses the task right after the
// intent is recorded; reconciliation finds the intent and the deletion
// happens.
func TestRedisFlushedAfterIntent(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		w, _, reg := e.workers(t, nil)
		id := e.use(t, "chat")
		if err := w.DeleteChats(ctx(t), []sandbox.Scope{e.scope("chat")}); err != nil {
			t.Fatal(err)
		}
		if err := e.redis.FlushAll(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		start(t, w)
		e.clock.Add(2 * time.Minute)
		if err := w.HandleReconcile(ctx(t), asynq.NewTask(workers.TypeReconcile, nil)); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		eventually(t, "the sandbox is deleted", func() bool {
			_, ok := e.record(t, id)
			return !ok && e.providerStatus(t, id) == sandbox.StatusMissing
		})
		if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "requeued_deletion"); got != 1 {
			t.Errorf("requeued deletions = %v, want 1", got)
		}
	})
}

// TestDeleteWithRedisDown: the intent is recorded and DeleteChats succeeds
// even when the task cannot be queued.
func TestDeleteWithRedisDown(t *testing.T) {
	e := newEnv(t, bwrapProvider(t), redisKinds[1].start(t))
	e.use(t, "chat")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	e.redis = redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { e.redis.Close() })
	w, _, reg := e.workers(t, nil)
	if err := w.DeleteChats(ctx(t), []sandbox.Scope{e.scope("chat")}); err != nil {
		t.Fatalf("DeleteChats with Redis down: %v, want success once the intent is recorded", err)
	}
	if d, err := e.store.GetDeletion(ctx(t), mongostore.ChatDeletionKey(e.scope("chat"))); err != nil || d.State != mongostore.DeletionPending {
		t.Errorf("intent = %+v, %v; want pending", d, err)
	}
	if got := metric(t, reg, "flowbox_deletion_enqueue_failures_total"); got != 1 {
		t.Errorf("enqueue failures = %v, want 1", got)
	}
}

// TestBadPayloadIsNotRetried: a task whose payload cannot be read fails
// at once, for good.
func TestBadPayloadIsNotRetried(t *testing.T) {
	e := newEnv(t, bwrapProvider(t), redisKinds[1].start(t))
	w, _, _ := e.workers(t, nil)
	tests := []struct {
		name string
		task *asynq.Task
	}{
		{"chat: not JSON", asynq.NewTask(workers.TypeDeleteChat, []byte("{"))},
		{"chat: no chats", asynq.NewTask(workers.TypeDeleteChat, []byte(`{"appId":"a"}`))},
		{"app: no app", asynq.NewTask(workers.TypeDeleteApp, []byte(`{}`))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch tc.task.Type() {
			case workers.TypeDeleteChat:
				err = w.HandleDeleteChat(ctx(t), tc.task)
			default:
				err = w.HandleDeleteApp(ctx(t), tc.task)
			}
			if !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("error = %v, want one wrapping asynq.SkipRetry", err)
			}
		})
	}
}

// TestShutdownLetsTasksFinish: a worker told to shut down while a
// deletion runs lets it finish before it returns.
func TestShutdownLetsTasksFinish(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		p := &faultyDelete{Provider: bwrapProvider(t), entered: make(chan struct{}, 1), gate: make(chan struct{})}
		e := newEnv(t, p, addr)
		w, _, _ := e.workers(t, nil)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		id := e.use(t, "chat")
		if err := w.DeleteChats(ctx(t), []sandbox.Scope{e.scope("chat")}); err != nil {
			t.Fatal(err)
		}
		<-p.entered
		stopped := make(chan struct{})
		go func() { w.Shutdown(); close(stopped) }()
		select {
		case <-stopped:
			t.Fatal("Shutdown returned while a task was still running")
		case <-time.After(300 * time.Millisecond):
		}
		close(p.gate)
		select {
		case <-stopped:
		case <-time.After(time.Minute):
			t.Fatal("Shutdown did not return after the task finished")
		}
		if _, ok := e.record(t, id); ok {
			t.Error("the running deletion did not finish: its record is still there")
		}
		if d, err := e.store.GetDeletion(ctx(t), mongostore.ChatDeletionKey(e.scope("chat"))); err != nil || d.State != mongostore.DeletionDone {
			t.Errorf("intent after shutdown = %+v, %v; want done", d, err)
		}
	})
}
