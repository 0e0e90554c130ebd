package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/sandbox"
)

func TestTouchRefusesDeletedChats(t *testing.T) {
	// An intent recorded before chat ids were scoped names no user: it
	// stands for the chat id of every user of the app.
	unscoped := ChatDeletion(sandbox.Scope{AppID: "app1", ChatID: "chat1"}, "task", t0)
	tests := []struct {
		name    string
		intent  Deletion
		done    bool
		chat    string
		refused bool
	}{
		{"another user's chat of the same id", ChatDeletion(sandbox.Scope{AppID: "app1", UserID: "user2", ChatID: "chat1"}, "task", t0), false, "chat1", false},
		{"an unscoped chat deletion", unscoped, false, "chat1", true},
		{"chat deletion pending", ChatDeletion(sandbox.Scope{AppID: "app1", UserID: "user1", ChatID: "chat1"}, "task", t0), false, "chat1", true},
		{"chat deletion done", ChatDeletion(sandbox.Scope{AppID: "app1", UserID: "user1", ChatID: "chat1"}, "task", t0), true, "chat1", true},
		{"app deletion", AppDeletion("app1", "task", t0), false, "chat1", true},
		{"another chat's deletion", ChatDeletion(sandbox.Scope{AppID: "app1", UserID: "user1", ChatID: "chat2"}, "task", t0), false, "chat1", false},
		{"another app's deletion", AppDeletion("app2", "task", t0), false, "chat1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, db := newStore(t)
			ctx := context.Background()
			if err := s.RequestDeletions(ctx, []Deletion{tc.intent}); err != nil {
				t.Fatal(err)
			}
			if tc.done {
				if err := s.FinishDeletions(ctx, []string{tc.intent.ID}, t0); err != nil {
					t.Fatal(err)
				}
			}
			err := s.Touch(ctx, instance("0123456789abcdef", tc.chat), t0)
			if got := errors.Is(err, sandbox.ErrDeleted); got != tc.refused {
				t.Fatalf("Touch: err = %v; refused %v, want %v", err, got, tc.refused)
			}
			want := int64(1)
			if tc.refused {
				want = 0
			}
			if n, _ := db.Collection(Collection).CountDocuments(ctx, bson.D{}); n != want {
				t.Errorf("records after Touch = %d, want %d", n, want)
			}
		})
	}
}

func TestTouchWaitsOutClaims(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	inst := instance("0123456789abcdef", "chat1")
	if err := s.Touch(ctx, inst, t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, "docker", []string{inst.SandboxID}, "scan-1", "stop", t0)
	if err != nil || !slices.Equal(got, []string{inst.SandboxID}) {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	later := t0.Add(time.Minute)
	if err := s.Touch(ctx, inst, later); !errors.Is(err, sandbox.ErrBusy) {
		t.Fatalf("Touch of a claimed sandbox: %v, want ErrBusy", err)
	}
	if rec, _ := s.Get(ctx, "docker", inst.SandboxID); !rec.LastActiveAt.Equal(ms(t0)) {
		t.Errorf("a refused Touch wrote lastActiveAt %v, want it left at %v", rec.LastActiveAt, ms(t0))
	}
	if err := s.Release(ctx, "docker", []string{inst.SandboxID}, "scan-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(ctx, inst, later); err != nil {
		t.Fatalf("Touch after the release: %v", err)
	}
}

// TestRefresh: the warm path's Touch writes a running record's
// lastActiveAt before it looks for claims and deletions, and is Touch for
// any other record.
// TestCreate: a new sandbox's record in one insert; an existing record,
// a deleted chat and a claim are treated as Touch treats them.
func TestCreate(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	inst := instance("0123456789abcdef", "chat1")
	if created, err := s.Create(ctx, inst, t0); err != nil || !created {
		t.Fatalf("Create of a new sandbox = %v, %v; want true", created, err)
	}
	rec, err := s.Get(ctx, "docker", inst.SandboxID)
	if err != nil || rec.Status != sandbox.StatusRunning || !rec.LastActiveAt.Equal(ms(t0)) || !rec.CreatedAt.Equal(ms(t0)) ||
		rec.AppID != "app1" || rec.UserID != "user1" || rec.ChatID != "chat1" || rec.Limit != inst.Limit {
		t.Fatalf("the created record: %+v, %v", rec, err)
	}
	// A record that exists is left alone, whatever its status.
	if err := s.SetStatus(ctx, "docker", inst.SandboxID, sandbox.StatusStopped); err != nil {
		t.Fatal(err)
	}
	if created, err := s.Create(ctx, inst, t0.Add(time.Minute)); err != nil || created {
		t.Errorf("Create of an existing record = %v, %v; want false, nil", created, err)
	}
	if rec, _ := s.Get(ctx, "docker", inst.SandboxID); rec.Status != sandbox.StatusStopped || !rec.LastActiveAt.Equal(ms(t0)) {
		t.Errorf("Create changed an existing record: %s at %v", rec.Status, rec.LastActiveAt)
	}
	// So is another record of the same chat (Touch reports the clash).
	other := inst
	other.SandboxID = "fedcba9876543210"
	if created, err := s.Create(ctx, other, t0); err != nil || created {
		t.Errorf("Create of a second record for the chat = %v, %v; want false, nil", created, err)
	}

	// A claimed sandbox: the record stays, for the claim holder.
	claimed := instance("1111111111111111", "chat2")
	if _, err := s.Claim(ctx, "docker", []string{claimed.SandboxID}, "reconcile-1", "orphan", t0); err != nil {
		t.Fatal(err)
	}
	if created, err := s.Create(ctx, claimed, t0); !errors.Is(err, sandbox.ErrBusy) || !created {
		t.Errorf("Create of a claimed sandbox = %v, %v; want true, ErrBusy", created, err)
	}
	if _, err := s.Get(ctx, "docker", claimed.SandboxID); err != nil {
		t.Errorf("the record created under a claim: %v", err)
	}

	// A deleted chat: nothing is left.
	deleted := instance("2222222222222222", "chat3")
	if err := s.RequestDeletions(ctx, []Deletion{ChatDeletion(sandbox.Scope{AppID: "app1", UserID: "user1", ChatID: "chat3"}, "task", t0)}); err != nil {
		t.Fatal(err)
	}
	if created, err := s.Create(ctx, deleted, t0); !errors.Is(err, sandbox.ErrDeleted) || created {
		t.Errorf("Create for a deleted chat = %v, %v; want false, ErrDeleted", created, err)
	}
	if n, _ := db.Collection(Collection).CountDocuments(ctx, bson.D{}); n != 2 {
		t.Errorf("%d records, want the first chat's and the claimed one", n)
	}
}

// TestCreateConcurrent: first commands of one chat in several engine
// processes at once: one of them creates the record.
func TestCreateConcurrent(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	inst := instance("0123456789abcdef", "chat1")
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for range 8 {
		wg.Go(func() {
			ok, err := s.Create(ctx, inst, t0)
			if err != nil {
				t.Errorf("Create: %v", err)
			}
			if ok {
				mu.Lock()
				created++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if created != 1 {
		t.Errorf("%d of 8 concurrent Creates created the record, want 1", created)
	}
	if n, _ := db.Collection(Collection).CountDocuments(ctx, bson.D{}); n != 1 {
		t.Errorf("%d records, want 1", n)
	}
}

func TestRefresh(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	inst := instance("0123456789abcdef", "chat1")
	// It never inserts: the sandbox's record went while its command ran.
	if err := s.Refresh(ctx, inst, t0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Refresh without a record: %v, want ErrNotFound", err)
	}
	if n, _ := db.Collection(Collection).CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d records after a Refresh without one, want none", n)
	}
	if err := s.Touch(ctx, inst, t0); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	if err := s.Refresh(ctx, inst, later); err != nil {
		t.Fatalf("Refresh of a running sandbox: %v", err)
	}
	if rec, err := s.Get(ctx, "docker", inst.SandboxID); err != nil || rec.Status != sandbox.StatusRunning || !rec.LastActiveAt.Equal(ms(later)) {
		t.Fatalf("record after Refresh: %+v, %v; want running at %v", rec, err, ms(later))
	}
	if _, err := s.Claim(ctx, "docker", []string{inst.SandboxID}, "scan-1", "stop", t0); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	if err := s.Refresh(ctx, inst, later); !errors.Is(err, sandbox.ErrBusy) {
		t.Fatalf("Refresh of a claimed, running sandbox: %v, want ErrBusy", err)
	}
	// The holder reads the record after its claim: it sees the sandbox in
	// use, and the status is still its to change.
	if rec, _ := s.Get(ctx, "docker", inst.SandboxID); rec.Status != sandbox.StatusRunning || !rec.LastActiveAt.Equal(ms(later)) {
		t.Errorf("after a refused Refresh: %s at %v; want running at %v", rec.Status, rec.LastActiveAt, ms(later))
	}
	// Once the holder has marked it stopping, the status stays the
	// holder's; the use is dated.
	if err := s.SetStatus(ctx, "docker", inst.SandboxID, sandbox.StatusStopping); err != nil {
		t.Fatal(err)
	}
	later = later.Add(time.Minute)
	if err := s.Refresh(ctx, inst, later); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Fatalf("Refresh of a stopping sandbox: %v, want ErrNotRunning", err)
	}
	if rec, _ := s.Get(ctx, "docker", inst.SandboxID); rec.Status != sandbox.StatusStopping || !rec.LastActiveAt.Equal(ms(later)) {
		t.Errorf("after a Refresh of a stopping sandbox: %s at %v; want stopping at %v", rec.Status, rec.LastActiveAt, ms(later))
	}
	// A stop that ended after the command is not undone.
	if err := s.Release(ctx, "docker", []string{inst.SandboxID}, "scan-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus(ctx, "docker", inst.SandboxID, sandbox.StatusStopped); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx, inst, later); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Fatalf("Refresh of a stopped sandbox: %v, want ErrNotRunning", err)
	}
	if rec, _ := s.Get(ctx, "docker", inst.SandboxID); rec.Status != sandbox.StatusStopped {
		t.Errorf("a stopped sandbox's Refresh left %s, want it stopped", rec.Status)
	}

	// A deletion is Deleted's to report, whether the chat has a record or
	// not; Refresh still inserts nothing.
	if err := s.SetStatus(ctx, "docker", inst.SandboxID, sandbox.StatusRunning); err != nil {
		t.Fatal(err)
	}
	if err := s.Deleted(ctx, inst); err != nil {
		t.Fatalf("Deleted before any deletion: %v, want nil", err)
	}
	if err := s.RequestDeletions(ctx, []Deletion{ChatDeletion(sandbox.Scope{AppID: "app1", UserID: "user1", ChatID: "chat1"}, "task", t0), AppDeletion("app2", "task", t0)}); err != nil {
		t.Fatal(err)
	}
	other := instance("fedcba9876543210", "chat2")
	otherApp := other
	otherApp.AppID = "app2"
	for _, tc := range []struct {
		name string
		inst sandbox.Instance
		want error
	}{
		{"the deleted chat", inst, sandbox.ErrDeleted},
		{"another chat of its app", other, nil},
		{"a chat of a deleted app", otherApp, sandbox.ErrDeleted},
	} {
		if err := s.Deleted(ctx, tc.inst); !errors.Is(err, tc.want) {
			t.Errorf("Deleted for %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := s.Refresh(ctx, other, later); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Refresh of a chat without a record: %v, want ErrNotFound", err)
	}
	if n, _ := db.Collection(Collection).CountDocuments(ctx, bson.D{}); n != 1 {
		t.Errorf("%d records, want the first chat's only", n)
	}
}

// TestTouchRacingDeletion: whichever of a first Touch and a deletion
// request comes first, a refused Touch leaves no record and an accepted one
// leaves its record for the deletion to find.
func TestTouchRacingDeletion(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	refused := 0
	const rounds = 30
	for i := range rounds {
		chat := fmt.Sprintf("chat%d", i)
		inst := instance(fmt.Sprintf("%016x", i), chat)
		var wg sync.WaitGroup
		var touchErr, reqErr error
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
			touchErr = s.Touch(ctx, inst, t0)
		})
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(30000)) * time.Microsecond)
			reqErr = s.RequestDeletions(ctx, []Deletion{ChatDeletion(sandbox.Scope{AppID: inst.AppID, UserID: inst.UserID, ChatID: chat}, "task", t0)})
		})
		wg.Wait()
		if reqErr != nil {
			t.Fatal(reqErr)
		}
		_, getErr := s.Get(ctx, inst.Provider, inst.SandboxID)
		switch {
		case errors.Is(touchErr, sandbox.ErrDeleted):
			refused++
			if !errors.Is(getErr, sandbox.ErrNotFound) {
				t.Fatalf("round %d: Touch was refused but left a record (%v)", i, getErr)
			}
		case touchErr == nil:
			if getErr != nil {
				t.Fatalf("round %d: Touch succeeded but there is no record: %v", i, getErr)
			}
		default:
			t.Fatalf("round %d: Touch: %v", i, touchErr)
		}
	}
	t.Logf("%d of %d first Touches were refused: the deletion was requested before or during them", refused, rounds)
}

func TestClaims(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	steps := []struct {
		name  string
		owner string
		ids   []string
		want  []string
	}{
		{"free", "w1", []string{"a", "b"}, []string{"a", "b"}},
		{"one taken", "w2", []string{"b", "c"}, []string{"c"}},
		{"taken by the same owner", "w1", []string{"a"}, []string{}},
	}
	for _, st := range steps {
		got, err := s.Claim(ctx, "bwrap", st.ids, st.owner, "stop", t0)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !slices.Equal(got, st.want) && !(len(got) == 0 && len(st.want) == 0) {
			t.Errorf("%s: Claim(%v) by %s = %v, want %v", st.name, st.ids, st.owner, got, st.want)
		}
	}
	// Another owner cannot release w1's claims.
	if err := s.Release(ctx, "bwrap", []string{"a", "b", "c"}, "w2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Claim(ctx, "bwrap", []string{"a", "b", "c"}, "w3", "stop", t0); !slices.Equal(got, []string{"c"}) {
		t.Errorf("after w2 released its claims: w3 claimed %v, want [c] (a and b are still w1's)", got)
	}
	stale, err := s.StaleClaims(ctx, t0.Add(time.Second))
	if err != nil || len(stale) != 3 {
		t.Fatalf("StaleClaims = %v, %v; want the 3 claims", stale, err)
	}
	if fresh, _ := s.StaleClaims(ctx, t0); len(fresh) != 0 {
		t.Errorf("claims taken at t0 are stale before t0: %v", fresh)
	}
	if err := s.DropClaim(ctx, stale[0]); err != nil {
		t.Fatal(err)
	}
	if rest, _ := s.StaleClaims(ctx, t0.Add(time.Second)); len(rest) != 2 {
		t.Errorf("after DropClaim, %d claims left, want 2", len(rest))
	}
}

func TestDeletions(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	intents := []Deletion{
		ChatDeletion(sandbox.Scope{AppID: "app/1", UserID: "user1", ChatID: "chat1"}, "t1", t0),
		ChatDeletion(sandbox.Scope{AppID: "app", UserID: "user1", ChatID: "1/chat1"}, "t1", t0.Add(time.Second)), // must not collide with the first
		AppDeletion("app2", "t2", t0.Add(2*time.Second)),
	}
	if err := s.RequestDeletions(ctx, intents); err != nil {
		t.Fatal(err)
	}
	pending := func(before time.Time) []string {
		t.Helper()
		ds, err := s.PendingDeletions(ctx, before, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return ids
	}
	all := []string{intents[0].ID, intents[1].ID, intents[2].ID}
	if got := pending(t0.Add(time.Hour)); !slices.Equal(got, all) {
		t.Fatalf("pending = %v, want %v, oldest first", got, all)
	}
	if got := pending(t0.Add(time.Second)); !slices.Equal(got, all[:1]) {
		t.Errorf("pending before t0+1s = %v, want %v", got, all[:1])
	}
	if err := s.SetDeletionTask(ctx, all[2:], "t3"); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.GetDeletion(ctx, all[2]); d.TaskID != "t3" {
		t.Errorf("task of %s = %q, want t3", all[2], d.TaskID)
	}
	done := t0.Add(time.Minute)
	if err := s.FinishDeletions(ctx, all[:2], done); err != nil {
		t.Fatal(err)
	}
	if got := pending(t0.Add(time.Hour)); !slices.Equal(got, all[2:]) {
		t.Errorf("pending after two finished = %v, want %v", got, all[2:])
	}
	// Deleting again makes a done intent pending, with the new task.
	again := ChatDeletion(sandbox.Scope{AppID: "app/1", UserID: "user1", ChatID: "chat1"}, "t9", t0.Add(time.Hour))
	if err := s.RequestDeletions(ctx, []Deletion{again}); err != nil {
		t.Fatal(err)
	}
	d, err := s.GetDeletion(ctx, again.ID)
	if err != nil || d.State != DeletionPending || d.TaskID != "t9" || !d.DoneAt.IsZero() || !d.RequestedAt.Equal(ms(t0)) {
		t.Errorf("intent deleted again = %+v, %v; want pending, task t9, first request time kept", d, err)
	}
	if n, err := s.PurgeDeletions(ctx, done.Add(time.Second)); err != nil || n != 1 {
		t.Errorf("PurgeDeletions = %d, %v; want the one done intent purged", n, err)
	}
	if _, err := s.GetDeletion(ctx, all[1]); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("purged intent still there: %v", err)
	}
}

func TestQueries(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	for i, r := range []struct{ app, chat string }{{"a1", "c1"}, {"a1", "c2"}, {"a1", "c3"}, {"a2", "c1"}} {
		inst := instance(fmt.Sprintf("%016x", i), r.chat)
		inst.AppID = r.app
		if err := s.Touch(ctx, inst, t0); err != nil {
			t.Fatal(err)
		}
	}
	chats := func(insts []sandbox.Instance) []string {
		var out []string
		for _, i := range insts {
			out = append(out, i.AppID+"/"+i.ChatID)
		}
		slices.Sort(out)
		return out
	}
	scopes := func(user string, ids ...string) []sandbox.Scope {
		var out []sandbox.Scope
		for _, id := range ids {
			out = append(out, sandbox.Scope{AppID: "a1", UserID: user, ChatID: id})
		}
		return out
	}
	got, err := s.ByChats(ctx, "a1", scopes("user1", "c1", "c3", "c9"))
	if err != nil || !slices.Equal(chats(got), []string{"a1/c1", "a1/c3"}) {
		t.Errorf("ByChats(a1, c1 c3 c9) = %v, %v", chats(got), err)
	}
	if got, err := s.ByChats(ctx, "a1", scopes("user2", "c1", "c3")); err != nil || len(got) != 0 {
		t.Errorf("ByChats(a1, user2's c1 c3) = %v, %v; want none: those are user1's", chats(got), err)
	}
	if got, err := s.ByChats(ctx, "a1", scopes("", "c2")); err != nil || !slices.Equal(chats(got), []string{"a1/c2"}) {
		t.Errorf("ByChats(a1, every user's c2) = %v, %v", chats(got), err)
	}
	got, err = s.ByApp(ctx, "a1", 2)
	if err != nil || len(got) != 2 || got[0].AppID != "a1" || got[1].AppID != "a1" {
		t.Errorf("ByApp(a1, 2) = %v, %v", chats(got), err)
	}
	got, err = s.ByProvider(ctx, "docker")
	if err != nil || len(got) != 4 {
		t.Errorf("ByProvider(docker) = %d records, %v; want 4", len(got), err)
	}
	for _, st := range []sandbox.Status{sandbox.StatusRunning, sandbox.StatusStopped, sandbox.StatusStopping, sandbox.StatusDeleting} {
		if err := s.SetStatus(ctx, "docker", fmt.Sprintf("%016x", 1), st); err != nil {
			t.Errorf("SetStatus(%s): %v", st, err)
		}
	}
}

func TestWriteRetriesBusy(t *testing.T) {
	busy := errors.New("(InternalError) [collection.go:177] database is locked (5) (SQLITE_BUSY)")
	other := errors.New("(DuplicateKey) E11000")
	tests := []struct {
		name      string
		errs      []error // what op returns, call by call; nil after
		wantCalls int
		wantErr   error
	}{
		{"succeeds", nil, 1, nil},
		{"busy twice", []error{busy, busy}, 3, nil},
		{"other error", []error{other}, 1, other},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := write(context.Background(), func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) {
				t.Errorf("calls %d, err %v; want %d, %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
