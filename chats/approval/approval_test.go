package approval_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowbox/flowbox/chats/approval"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// alices is alice's chat of app (put's approvals are hers).
func alices(app, chat string) sandbox.Scope {
	return sandbox.Scope{AppID: app, UserID: "u:alice", ChatID: chat}
}

func put(t *testing.T, s *approval.Store, id, app, chat string, expires time.Time) {
	t.Helper()
	err := s.Put(context.Background(), approval.Approval{ID: id, AppID: app, ChatID: chat, UserID: "u:alice", Command: "rm x",
		Rule: "ask-rm", ToolCallID: "call_" + id, CreatedAt: expires.Add(-time.Minute), ExpiresAt: expires,
		Paused: nodes.Paused{Request: nodes.ApprovalRequest{ID: id}}, VersionID: app + "-v1"})
	if err != nil {
		t.Fatal(err)
	}
}

// TestExpire: the sweep settles the approvals past their expiry that
// nobody answered, each once and audited as an expired rejection; it
// leaves answered and future ones alone.
func TestExpire(t *testing.T) {
	ctx := context.Background()
	s := approval.New(mongotest.DB(t))
	now := time.Now()
	put(t, s, "apr_old", "app", "c1", now.Add(-time.Hour))
	put(t, s, "apr_answered", "app", "c2", now.Add(-time.Hour))
	put(t, s, "apr_future", "app", "c3", now.Add(time.Hour))
	if err := s.Claim(ctx, "apr_answered", approval.Answer{Decision: nodes.Approve, At: now}); err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	n, err := s.Expire(ctx, now, func(r audit.Record) { recs = append(recs, r) })
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if len(recs) != 1 || recs[0].ChatID != "c1" || recs[0].Reason != approval.Expired || recs[0].Status != audit.StatusRejected ||
		recs[0].Rule != "ask-rm" || recs[0].ToolCallID != "call_apr_old" {
		t.Errorf("records %+v, want one expired rejection of c1", recs)
	}
	if _, ans, err := s.Get(ctx, "apr_old"); err != nil || ans == nil || ans.Decision != approval.Expired {
		t.Errorf("apr_old answer %+v, %v; want expired", ans, err)
	}
	if _, ans, _ := s.Get(ctx, "apr_answered"); ans == nil || ans.Decision != nodes.Approve {
		t.Errorf("apr_answered answer %+v, want its approval kept", ans)
	}
	if id, _ := s.Pending(ctx, alices("app", "c3")); id != "apr_future" {
		t.Errorf("c3 pending %q, want apr_future still waiting", id)
	}
	if a, _, _ := s.Get(ctx, "apr_future"); a.VersionID != "app-v1" {
		t.Errorf("apr_future's version %q, want the one its run paused in (app-v1)", a.VersionID)
	}
	if n, err := s.Expire(ctx, now, func(audit.Record) { t.Error("a second sweep audited again") }); err != nil || n != 0 {
		t.Errorf("second Expire = %d, %v; want 0", n, err)
	}
}

// TestDeleteChats: deleting chats removes their approvals, answers,
// pending marks and approved commands, and nothing of other chats or
// apps; deleting an app removes all of its chats'.
func TestDeleteChats(t *testing.T) {
	ctx := context.Background()
	s := approval.New(mongotest.DB(t))
	later := time.Now().Add(time.Hour)
	put(t, s, "apr_1", "app", "gone", later)
	put(t, s, "apr_2", "app", "kept", later)
	put(t, s, "apr_3", "other", "gone", later) // the same chat id in another app
	put(t, s, "apr_4", "app", "also", later)
	if err := s.Claim(ctx, "apr_1", approval.Answer{Decision: nodes.ApproveChat, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.ApproveInChat(ctx, alices("app", "gone"), "rm x"); err != nil {
		t.Fatal(err)
	}
	// Bob's chat "gone" of the same app is another chat: deleting it
	// leaves alice's alone, and her approval in it reaches nobody else.
	bobs := sandbox.Scope{AppID: "app", UserID: "u:bob", ChatID: "gone"}
	if ok, _ := s.ApprovedInChat(ctx, bobs, "rm x"); ok {
		t.Error("alice's approval for her chat gone holds in bob's chat gone")
	}
	if id, _ := s.Pending(ctx, bobs); id != "" {
		t.Errorf("bob's chat gone waits for alice's approval %q", id)
	}
	if err := s.DeleteChats(ctx, []sandbox.Scope{bobs}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.ApprovedInChat(ctx, alices("app", "gone"), "rm x"); !ok {
		t.Error("deleting bob's chat gone took alice's approved command")
	}
	if err := s.DeleteChats(ctx, []sandbox.Scope{alices("app", "gone")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "apr_1"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("apr_1 after deleting its chat: %v, want not found", err)
	}
	if ok, _ := s.ApprovedInChat(ctx, alices("app", "gone"), "rm x"); ok {
		t.Error("the chat's approved command survived its deletion")
	}
	for _, id := range []string{"apr_2", "apr_3", "apr_4"} {
		if _, _, err := s.Get(ctx, id); err != nil {
			t.Errorf("%s of another chat or app: %v", id, err)
		}
	}
	if err := s.DeleteChats(ctx, []sandbox.Scope{alices("app", "gone")}); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	if err := s.DeleteApp(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"apr_2": false, "apr_4": false, "apr_3": true} {
		_, _, err := s.Get(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("%s exists %v after deleting app, want %v (%v)", id, got, want, err)
		}
	}
	if id, _ := s.Pending(ctx, alices("app", "kept")); id != "" {
		t.Errorf("kept's pending mark survived its app: %q", id)
	}
}

// TestInteractiveQuestions: an interactive node's question is kept like
// an approval, with its kind and options, and its answer's value; one
// that expires is settled without a command rejection in the audit.
func TestInteractiveQuestions(t *testing.T) {
	ctx := context.Background()
	s := approval.New(mongotest.DB(t))
	now := time.Now()
	q := nodes.Request{ID: "itr_1", Kind: nodes.KindUserSelect, Description: "Which plan?",
		Options: []nodes.SelectOption{{Value: "Basic", Key: "basic"}, {Value: "Pro", Key: "pro"}}}
	for _, a := range []approval.Approval{
		{ID: "itr_1", AppID: "app", ChatID: "c1", UserID: "u:alice", Kind: q.Kind, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
			Paused: nodes.Paused{NodeID: "ask", Request: q}},
		{ID: "itr_old", AppID: "app", ChatID: "c2", UserID: "u:alice", Kind: nodes.KindFormInput, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour),
			Paused: nodes.Paused{NodeID: "form", Request: nodes.Request{ID: "itr_old", Kind: nodes.KindFormInput}}},
	} {
		if err := s.Put(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	got, ans, err := s.Get(ctx, "itr_1")
	if err != nil || ans != nil || got.Kind != nodes.KindUserSelect || got.IsCommand() ||
		got.Paused.Request.Description != "Which plan?" || len(got.Paused.Request.Options) != 2 || got.Paused.Request.Options[1].Key != "pro" {
		t.Fatalf("Get = %+v, %v, %v", got, ans, err)
	}
	if id, _ := s.Pending(ctx, alices("app", "c1")); id != "itr_1" {
		t.Errorf("pending %q, want itr_1", id)
	}
	if err := s.Claim(ctx, "itr_1", approval.Answer{Decision: approval.Answered, Value: `{"choice":"pro"}`, At: now}); err != nil {
		t.Fatal(err)
	}
	if _, ans, _ := s.Get(ctx, "itr_1"); ans == nil || ans.Decision != approval.Answered || ans.Value != `{"choice":"pro"}` {
		t.Errorf("answer %+v", ans)
	}
	n, err := s.Expire(ctx, now, func(r audit.Record) { t.Errorf("an interactive question expired as a command rejection: %+v", r) })
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want the old question settled", n, err)
	}
	if _, ans, _ := s.Get(ctx, "itr_old"); ans == nil || ans.Decision != approval.Expired {
		t.Errorf("itr_old answer %+v, want expired", ans)
	}
}
