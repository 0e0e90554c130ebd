package api

import (
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
)

// TestAccessRules: who may use, edit and manage the chats of an app, and
// whose chat a request names, by the caller alone.
func TestAccessRules(t *testing.T) {
	a := &Access{}
	app := apps.App{ID: "app1", OwnerID: "owner"}
	public := apps.App{ID: "pub", OwnerID: "owner", Public: true}
	var (
		nobody  auth.Principal
		owner   = auth.Principal{UserID: "owner", Role: auth.RoleUser}
		other   = auth.Principal{UserID: "other", Role: auth.RoleUser}
		admin   = auth.Principal{UserID: "root", Role: auth.RoleAdmin}
		key     = auth.Principal{UserID: auth.AppKeyUser("app1"), Role: auth.RoleUser, AppID: "app1", ViaKey: true}
		visitor = auth.Principal{UserID: "link:l1:v1", Role: auth.RoleUser, AppID: "app1", LinkID: "l1"}
	)
	for _, tc := range []struct {
		who                string
		p                  auth.Principal
		app                apps.App
		use, edit, manages bool
	}{
		{"nobody", nobody, public, false, false, false},
		{"the owner", owner, app, true, true, true},
		{"another user", other, app, false, false, false},
		{"another user, a public app", other, public, true, false, false},
		{"an admin", admin, app, true, true, true},
		{"the app's key", key, app, true, false, true},
		{"the app's key, another app", key, public, false, false, false},
		{"a visitor", visitor, app, true, false, false},
	} {
		if got := a.CanUseApp(tc.p, tc.app); got != tc.use {
			t.Errorf("%s: CanUseApp %v, want %v", tc.who, got, tc.use)
		}
		if got := a.CanEditApp(tc.p, tc.app); got != tc.edit {
			t.Errorf("%s: CanEditApp %v, want %v", tc.who, got, tc.edit)
		}
		if got := a.ManagesChats(tc.p, tc.app); got != tc.manages {
			t.Errorf("%s: ManagesChats %v, want %v", tc.who, got, tc.manages)
		}
	}
	for _, tc := range []struct {
		who               string
		p                 auth.Principal
		userID, customUID string
		want              string
		problem           bool
	}{
		{"nobody", nobody, "", "", "", false},
		{"a user, their own", owner, "", "", "owner", false},
		{"a user naming another", owner, "other", "", "other", false},
		{"a visitor", visitor, "", "x", "link:l1:v1", false},
		{"a key, no customUid", key, "", "", auth.AppKeyUser("app1") + ":api", false},
		{"a key's end user", key, "", "alice", auth.AppKeyUser("app1") + ":alice", false},
		{"a key, a control character", key, "", "a\x00b", "", true},
	} {
		got, problem := a.Whose(tc.p, tc.userID, tc.customUID)
		if got != tc.want || (problem != "") != tc.problem {
			t.Errorf("%s: Whose %q, %q; want %q (a problem: %v)", tc.who, got, problem, tc.want, tc.problem)
		}
	}
}
