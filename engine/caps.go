package engine

import (
	"log/slog"

	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/chat"
)

// sandboxCaps are the manager's caps on running sandboxes; a share link's
// visitors make one group, an app key's end users another, and owners
// finds whose apps and links they are.
func sandboxCaps(c config.Caps, owners *sandbox.Owners) sandbox.Caps {
	return sandbox.Caps{Global: c.Sandboxes, PerUser: c.UserSandboxes, PerGroup: c.LinkSandboxes, PerApp: c.AppSandboxes,
		PerOwner: c.OwnerSandboxes, Group: sandbox.UserGroup, Owner: owners.Owner}
}

// runLimits are the caps on chat runs in progress, counted in the
// engine's Redis under its database's name.
func runLimits(svc *Services, c config.Caps, log *slog.Logger) *chat.RunLimits {
	return &chat.RunLimits{Redis: svc.Redis, Namespace: svc.DB.Name(),
		Global: c.Runs, PerUser: c.UserRuns, PerGroup: c.LinkRuns, PerApp: c.AppRuns, PerOwner: c.OwnerRuns,
		Group: sandbox.UserGroup, Owner: svc.Owners.Owner, Log: log}
}
