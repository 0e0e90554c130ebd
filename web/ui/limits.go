package ui

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/chat"
)

// Limits are the caps the admin page shows with their current use: those
// on running sandboxes (the manager's) and those on chat runs.
type Limits struct {
	Sandboxes sandbox.Caps
	Runs      *chat.RunLimits
}

// capRow is one cap on the admin page. For a cap per user, share link,
// app or owner, Use is the highest use and Who the one that has it.
type capRow struct {
	Key     string `json:"key"`
	Label   string `json:"label"` // a label's key
	Setting string `json:"setting"`
	Limit   int    `json:"limit"`
	Use     int    `json:"use"`
	Who     string `json:"who,omitempty"`
}

// userUse is one user's share of the running sandboxes and chat runs.
type userUse struct {
	User      string `json:"user"`
	Sandboxes int    `json:"sandboxes"`
	Runs      int    `json:"runs"`
}

type limitsView struct {
	Caps []capRow `json:"caps"`
	// Busiest are the users with the most running sandboxes and runs in
	// progress, busiest first.
	Busiest []userUse `json:"busiest"`
	// RunsErr says why the runs in progress could not be counted.
	RunsErr string `json:"runsErr,omitempty"`
}

// busiestShown bounds the admin page's list of busiest users.
const busiestShown = 10

// view counts the running sandboxes among records (the provider's
// records, as the page lists them) and asks for the runs in progress.
func (l *Limits) view(ctx context.Context, records []sandbox.Instance) *limitsView {
	if l == nil {
		return nil
	}
	v := &limitsView{}
	boxes, boxUsers, boxGroups := 0, map[string]int{}, map[string]int{}
	for _, r := range records {
		if r.Status != sandbox.StatusRunning {
			continue
		}
		boxes++
		boxUsers[r.UserID]++
		if g := l.Sandboxes.GroupOf(r.UserID); g != "" {
			boxGroups[g]++
		}
	}
	// A user whose owner cannot be read counts for none here.
	boxOwners := map[string]int{}
	for u, n := range boxUsers {
		if o, err := l.Sandboxes.OwnerOf(ctx, u); err == nil && o != "" {
			boxOwners[o] += n
		}
	}
	runs, err := l.Runs.Use(ctx)
	if err != nil {
		v.RunsErr = err.Error()
	}
	var rl chat.RunLimits
	if l.Runs != nil {
		rl = *l.Runs
	}
	most := func(m map[string]int, name func(string) string) (int, string) {
		n, top := 0, ""
		for k, c := range m {
			if c > n || c == n && k < top {
				n, top = c, k
			}
		}
		if n == 0 {
			return 0, ""
		}
		return n, name(top)
	}
	same := func(s string) string { return s }
	row := func(key, label, setting string, limit int, m map[string]int, name func(string) string) capRow {
		use, who := most(m, name)
		return capRow{Key: key, Label: label, Setting: setting, Limit: limit, Use: use, Who: who}
	}
	// Groups of share links and of apps' end users have caps of their own.
	split := func(m map[string]int) (links, appUsers map[string]int) {
		links, appUsers = map[string]int{}, map[string]int{}
		for g, n := range m {
			if strings.HasPrefix(g, sandbox.AppKeyPrefix) {
				appUsers[g] = n
			} else {
				links[g] = n
			}
		}
		return links, appUsers
	}
	boxLinks, boxApps := split(boxGroups)
	runLinks, runApps := split(runs.Groups)
	v.Caps = []capRow{
		{Key: "sandboxes", Label: "capsSandboxes", Setting: "FLOWBOX_CAP_SANDBOXES", Limit: l.Sandboxes.Global, Use: boxes},
		row("user-sandboxes", "capsUserSandboxes", "FLOWBOX_CAP_USER_SANDBOXES", l.Sandboxes.PerUser, boxUsers, same),
		row("link-sandboxes", "capsLinkSandboxes", "FLOWBOX_CAP_LINK_SANDBOXES", l.Sandboxes.PerGroup, boxLinks, sandbox.GroupName),
		row("app-sandboxes", "capsAppSandboxes", "FLOWBOX_CAP_APP_SANDBOXES", l.Sandboxes.PerApp, boxApps, sandbox.GroupName),
		row("owner-sandboxes", "capsOwnerSandboxes", "FLOWBOX_CAP_OWNER_SANDBOXES", l.Sandboxes.PerOwner, boxOwners, same),
		{Key: "runs", Label: "capsRuns", Setting: "FLOWBOX_CAP_RUNS", Limit: rl.Global, Use: runs.Total},
		row("user-runs", "capsUserRuns", "FLOWBOX_CAP_USER_RUNS", rl.PerUser, runs.Users, same),
		row("link-runs", "capsLinkRuns", "FLOWBOX_CAP_LINK_RUNS", rl.PerGroup, runLinks, sandbox.GroupName),
		row("app-runs", "capsAppRuns", "FLOWBOX_CAP_APP_RUNS", rl.PerApp, runApps, sandbox.GroupName),
		row("owner-runs", "capsOwnerRuns", "FLOWBOX_CAP_OWNER_RUNS", rl.PerOwner, runs.Owners, same),
	}
	users := map[string]*userUse{}
	at := func(u string) *userUse {
		if users[u] == nil {
			users[u] = &userUse{User: u}
		}
		return users[u]
	}
	for u, n := range boxUsers {
		at(u).Sandboxes = n
	}
	for u, n := range runs.Users {
		at(u).Runs = n
	}
	for _, u := range users {
		v.Busiest = append(v.Busiest, *u)
	}
	slices.SortFunc(v.Busiest, func(a, b userUse) int {
		return cmp.Or(cmp.Compare(b.Sandboxes+b.Runs, a.Sandboxes+a.Runs), cmp.Compare(a.User, b.User))
	})
	if len(v.Busiest) > busiestShown {
		v.Busiest = v.Busiest[:busiestShown]
	}
	return v
}
