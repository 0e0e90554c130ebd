package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine"
)

// TestUserInviteCommand: an operator creates an account with a
// set-password link, and resets one by a link; each link works once and
// the latest replaces the earlier.
func TestUserInviteCommand(t *testing.T) {
	t.Setenv("FLOWBOX_DATA_DIR", t.TempDir())
	t.Setenv("FLOWBOX_LOG_LEVEL", "warn")
	ctx := context.Background()
	run := func(args ...string) (string, error) {
		var out strings.Builder
		err := user(ctx, args, strings.NewReader(""), &out)
		return out.String(), err
	}
	linkOf := func(what, out string, err error) string {
		t.Helper()
		_, after, ok := strings.Cut(out, "set-password link: /set-password/")
		token, _, _ := strings.Cut(after, "\n")
		if err != nil || !ok || !strings.HasPrefix(token, "fbp_") || strings.Contains(out, "password: ") {
			t.Fatalf("%s: %q %v; want a set-password link and no password", what, out, err)
		}
		return token
	}
	out, err := run("add", "ivy", "-invite", "-role", "admin")
	first := linkOf("add -invite", out, err)
	if !strings.Contains(out, "created ivy (admin)") {
		t.Errorf("add -invite: %q; want it to say ivy was created as an admin", out)
	}
	out, err = run("reset-password", "-invite", "ivy")
	second := linkOf("reset-password -invite", out, err)
	if _, err := run("disable", "-invite", "ivy"); err == nil || !strings.Contains(err.Error(), "-invite is for add and reset-password") {
		t.Errorf("disable -invite: %v", err)
	}
	if _, err := run("reset-password", "-invite", "nobody"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a link for an unknown user: %v", err)
	}

	cfg, log, err := setup()
	if err != nil {
		t.Fatal(err)
	}
	db, closeDB, _, err := engine.OpenMongo(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	accounts := auth.New(db)
	if _, err := accounts.UsePasswordLink(ctx, first, "ivy's password"); !errors.Is(err, auth.ErrLinkInvalid) {
		t.Errorf("the replaced link: %v, want %v", err, auth.ErrLinkInvalid)
	}
	if _, err := accounts.UsePasswordLink(ctx, second, "ivy's password"); err != nil {
		t.Fatalf("the latest link: %v", err)
	}
	if _, _, u, err := accounts.Login(ctx, "ivy", "ivy's password"); err != nil || u.Role != auth.RoleAdmin {
		t.Errorf("sign in with the password set by the link: %+v %v", u, err)
	}
}
