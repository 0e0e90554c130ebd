package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrLimit: starting the sandbox would pass a cap on running sandboxes
// (Config.Caps). Nothing was started; the caller may retry once some of
// the sandboxes counted have stopped. The error is a *LimitError that
// says which cap.
var ErrLimit = errors.New("sandbox limit reached")

// Caps bound how many sandboxes may run at once: in all, per user, per
// group of users (the visitors of one share link, say) and per owner.
// Zero means no cap. They are checked only when a sandbox that is not
// running must be started (a new chat's first command, or one after the
// stop scan stopped it): a running sandbox's commands are never refused.
//
// Within one engine process admissions are serialised and each counts the
// running sandboxes in the Store, shared by every process, before writing
// its own record, or, with a warm pool, right after inserting a new
// sandbox's record, its own then left out of the count (its record is
// removed again when refused): the caps are exact whatever the
// concurrency. The count may come from an index that can lag behind a
// stop; a count that would refuse is made again from the records, so a
// refusal always stands on the truth. (A store that fails to index the
// new record as running before the count, such as a Redis write lost,
// lets one more in.) Engine
// processes do not coordinate, so two of them admitting at the same
// instant may both see room for one more and both start a sandbox: the
// caps may be passed by at most one sandbox per other engine process
// admitting in that window (a few milliseconds), never more. Likewise a
// sandbox whose record still said running when its command looked, and
// which the stop scan stopped in the instant before the command's record
// write, starts again without being counted. The stop scan's idle stops
// bring the count back under the cap. A start the provider fails gives
// its place back (the record is marked stoped). How the store finds the
// running records, and what that costs, is its own (see
// mongostore.Store.RunningUsers).
//
// PerGroup caps a share link's visitors together, PerApp an app key's end
// users (T6: looping customUids on one key must not take the machine),
// PerOwner all the users of one owner (Owner): an account's own chats,
// its apps' key users and its share links' visitors (T6: many apps or
// links must not take the machine either). At PerUser, the user's least
// recently used idle sandbox is stopped (its files kept) to make room,
// rather than the new one refused (see IdleStopper); the other caps
// refuse.
type Caps struct {
	Global, PerUser, PerGroup, PerApp, PerOwner int
	// Group returns the user-id prefix that every member of userID's group
	// shares, or "" when userID belongs to no group; the running
	// sandboxes of the users whose id starts with it are counted against
	// PerGroup (a share link's group) or PerApp (an app's). Default
	// UserGroup.
	Group func(userID string) string
	// Owner returns the owner userID counts against under PerOwner, ""
	// for none (see Owners.Owner). It is asked only while PerOwner is
	// set; an error fails the start with ErrUnavailable, as a count that
	// fails does. Default: every user is its own owner.
	Owner func(ctx context.Context, userID string) (string, error)
}

// On reports whether any cap is set.
func (c Caps) On() bool {
	return c.Global > 0 || c.PerUser > 0 || c.PerGroup > 0 || c.PerApp > 0 || c.PerOwner > 0
}

// OwnerOf is c.Owner(ctx, userID), userID itself when Owner is nil.
func (c Caps) OwnerOf(ctx context.Context, userID string) (string, error) {
	if c.Owner == nil {
		return userID, nil
	}
	return c.Owner(ctx, userID)
}

// GroupOf is c.Group(userID), UserGroup when Group is nil.
func (c Caps) GroupOf(userID string) string {
	if c.Group == nil {
		return UserGroup(userID)
	}
	return c.Group(userID)
}

// GroupLimit is the cap on the group of prefix: PerApp for an app's end
// users, PerGroup for any other group.
func (c Caps) GroupLimit(prefix string) int {
	if strings.HasPrefix(prefix, AppKeyPrefix) {
		return c.PerApp
	}
	return c.PerGroup
}

// AppKeyPrefix starts the user ids of an app key's end users:
// app:<appId>:<customUid> (auth.AppKeyUser).
const AppKeyPrefix = "app:"

// AppKeyGroup groups the end users of one app's keys: for
// app:<appId>:<customUid> it returns "app:<appId>:"; for any other user
// id, "".
func AppKeyGroup(userID string) string { return groupOf(userID, AppKeyPrefix) }

// UserGroup is ShareLinkGroup or AppKeyGroup, whichever userID has.
func UserGroup(userID string) string {
	if g := ShareLinkGroup(userID); g != "" {
		return g
	}
	return AppKeyGroup(userID)
}

// ShareLinkPrefix starts the user ids of share-link visitors:
// share:<linkId>:<visitorId>.
const ShareLinkPrefix = "share:"

// ShareLinkGroup groups the visitors of one share link: for
// share:<linkId>:<visitorId> it returns "share:<linkId>:", the prefix
// they all share; for any other user id, "".
func ShareLinkGroup(userID string) string { return groupOf(userID, ShareLinkPrefix) }

// groupOf is the group of userID among the users named
// <prefix><id>:<member>: "<prefix><id>:", or "" when userID is not one
// of them.
func groupOf(userID, prefix string) string {
	rest, ok := strings.CutPrefix(userID, prefix)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ":")
	if !ok || id == "" {
		return ""
	}
	return prefix + id + ":"
}

// GroupName is how messages and pages name the group of prefix: "share
// link <id>" for a share link, the prefix without its last ':' otherwise.
func GroupName(prefix string) string {
	name := strings.TrimSuffix(prefix, ":")
	if link, ok := strings.CutPrefix(name, ShareLinkPrefix); ok {
		return "share link " + link
	}
	if app, ok := strings.CutPrefix(name, AppKeyPrefix); ok {
		return "app " + app + " (its key users)"
	}
	return name
}

// OwnerName is how messages name the owner whose cap (PerOwner) is
// reached: what it counts is not only the owner's own chats.
func OwnerName(owner string) string {
	return "owner " + owner + " (its own chats, its apps' key users and its share links' visitors together)"
}

// Which cap a LimitError names.
const (
	CapGlobal = "global"
	CapUser   = "user"
	CapGroup  = "group"
	CapOwner  = "owner"
)

// LimitError refuses a sandbox start past a cap. It matches ErrLimit.
type LimitError struct {
	Cap   string // CapGlobal, CapUser, CapGroup or CapOwner
	Group string // the group's prefix, for CapGroup
	Owner string // the owner's user id, for CapOwner
	Limit int    // the cap
	Use   int    // the running sandboxes it counts, before this one
}

func (e *LimitError) Error() string {
	wait := fmt.Sprintf("wait for idle ones to stop (a sandbox stops after %d minutes unused) or delete chats you no longer need, then retry", int(IdleAfter.Minutes()))
	switch e.Cap {
	case CapGlobal:
		return fmt.Sprintf("refused: the server already runs %d sandboxes and its limit is %d; retry in a few minutes, when idle ones have stopped", e.Use, e.Limit)
	case CapGroup:
		return fmt.Sprintf("refused: %s already has %d running sandboxes and its limit is %d; %s", GroupName(e.Group), e.Use, e.Limit, wait)
	case CapOwner:
		return fmt.Sprintf("refused: %s already has %d running sandboxes and the limit per owner is %d; %s", OwnerName(e.Owner), e.Use, e.Limit, wait)
	}
	// At the user's cap an idle sandbox is stopped to make room (admit):
	// a refusal means every one of them is running a command.
	return fmt.Sprintf("refused: you already have %d running sandboxes, all of them running commands, and the limit per user is %d; wait for one to finish or delete chats you no longer need, then retry", e.Use, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// RunningCounter is the optional part of a Store that Caps need.
// sandbox/mongostore implements it.
type RunningCounter interface {
	// RunningUsers returns the userId of every record of provider whose
	// status is running, one entry per record. Unless exact, it may answer
	// from an index that still holds sandboxes stopped a moment ago: never
	// fewer entries than exact, at times more, for less work.
	RunningUsers(ctx context.Context, provider string, exact bool) ([]string, error)
}

// count refuses inst's start when a cap is reached. It counts the running
// sandboxes the cheap way first; only a count that would refuse is made
// again exactly, so that a sandbox stopped a moment ago never refuses
// another's start: count decides as the exact count would. included says
// that inst's own record says running already (written by Create), so one
// entry of its user is not counted. The caller holds m.admission.
func (m *Manager) count(ctx context.Context, inst Instance, included bool) error {
	var refusal error
	for _, exact := range []bool{false, true} {
		users, err := m.counter.RunningUsers(ctx, inst.Provider, exact)
		if err != nil {
			return fmt.Errorf("count running sandboxes for the caps: %w: %w", ErrUnavailable, err)
		}
		owners, err := m.cfg.Caps.owners(ctx, users, inst.UserID)
		if err != nil {
			return fmt.Errorf("find the owners of the running sandboxes for the caps: %w: %w", ErrUnavailable, err)
		}
		if refusal = m.cfg.Caps.check(users, inst.UserID, included, owners); refusal == nil {
			return nil
		}
	}
	return refusal
}

// owners maps userID and each of users to its owner (Caps.OwnerOf), or is
// nil when PerOwner is off.
func (caps Caps) owners(ctx context.Context, users []string, userID string) (map[string]string, error) {
	if caps.PerOwner <= 0 {
		return nil, nil
	}
	owners := map[string]string{}
	for _, u := range slices.Concat([]string{userID}, users) {
		if _, ok := owners[u]; ok {
			continue
		}
		o, err := caps.OwnerOf(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("owner of %s: %w", u, err)
		}
		owners[u] = o
	}
	return owners, nil
}

// check refuses a start for userID past a cap, given the users of the
// running sandboxes, one entry per sandbox; included says that one entry
// of userID is the starting sandbox's own. owners maps each user to its
// owner ("" for none); nil leaves PerOwner unchecked.
func (caps Caps) check(users []string, userID string, included bool, owners map[string]string) error {
	if i := slices.Index(users, userID); included && i >= 0 {
		users = slices.Delete(slices.Clone(users), i, i+1)
	}
	group, owner := caps.GroupOf(userID), owners[userID]
	mine, ours, owned := 0, 0, 0
	for _, u := range users {
		if u == userID {
			mine++
		}
		if group != "" && strings.HasPrefix(u, group) {
			ours++
		}
		if owner != "" && owners[u] == owner {
			owned++
		}
	}
	groupCap := caps.GroupLimit(group)
	switch {
	case caps.PerUser > 0 && mine >= caps.PerUser:
		return &LimitError{Cap: CapUser, Limit: caps.PerUser, Use: mine}
	case groupCap > 0 && group != "" && ours >= groupCap:
		return &LimitError{Cap: CapGroup, Group: group, Limit: groupCap, Use: ours}
	case caps.PerOwner > 0 && owner != "" && owned >= caps.PerOwner:
		return &LimitError{Cap: CapOwner, Owner: owner, Limit: caps.PerOwner, Use: owned}
	case caps.Global > 0 && len(users) >= caps.Global:
		return &LimitError{Cap: CapGlobal, Limit: caps.Global, Use: len(users)}
	}
	return nil
}
