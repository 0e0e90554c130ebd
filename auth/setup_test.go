package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestPasswordLinkClock: a link works until PasswordLinkTTL has passed on
// the store's clock, not a moment longer, and two uses at once set the
// password once.
func TestPasswordLinkClock(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Now = func() time.Time { return now }
	u, link, err := s.CreateInvitedUser(ctx, "ann", RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	if !link.ExpiresAt.Equal(now.Add(PasswordLinkTTL)) || link.UserID != u.ID {
		t.Fatalf("link %+v; want ann's, expiring at %v", link, now.Add(PasswordLinkTTL))
	}
	if _, _, _, err := s.Login(ctx, "ann", ""); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("sign in before the password is set: %v", err)
	}

	now = now.Add(PasswordLinkTTL - time.Second)
	if got, _, err := s.PasswordLinkUser(ctx, link.Token); err != nil || got.Name != "ann" {
		t.Errorf("a second before the expiry: %+v %v", got, err)
	}
	now = now.Add(time.Second)
	if _, _, err := s.PasswordLinkUser(ctx, link.Token); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("at the expiry: %v, want %v", err, ErrLinkExpired)
	}
	if _, err := s.UsePasswordLink(ctx, link.Token, "ann's password"); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("use at the expiry: %v, want %v", err, ErrLinkExpired)
	}
	if n, err := s.passwordLinks().CountDocuments(ctx, map[string]any{}); err != nil || n != 0 {
		t.Errorf("%d links left after the expired one was used (%v), want 0", n, err)
	}

	link, err = s.IssuePasswordLink(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.UsePasswordLink(ctx, link.Token, "ann's password") })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrLinkInvalid):
			t.Errorf("a use that lost the race: %v, want %v", err, ErrLinkInvalid)
		}
	}
	if ok != 1 {
		t.Errorf("%d of 4 uses at once succeeded, want 1", ok)
	}
}
