package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// OwnerTTL is how long Owners keeps what it read: an app changes hands
// only by a transfer, which Owners.Moved shows this process at once and
// another engine process sees within OwnerTTL (plus what AppOwner's own
// cache adds).
const OwnerTTL = time.Minute

// ownersLimit bounds the names Owners keeps; past it the cache starts
// over.
const ownersLimit = 4096

// Owners finds the account a user id counts against under the owner
// caps (Caps.Owner, the run caps' likewise): an app key's end user
// (app:<appId>:<customUid>, or the key itself, app:<appId>) the app's
// owner; a share link's visitor (share:<linkId>:<visitor>) the owner of
// the link's app; any other user itself. A user of an app or link that is
// gone counts for no owner (""): it starts nothing new anyway.
//
// The answers are kept for TTL, so that counting the running sandboxes
// reads the apps once a minute, not at every start. Owners is safe for
// concurrent use; a zero Owners with AppOwner and LinkApp set is ready.
type Owners struct {
	// AppOwner returns the owner of appID, "" when there is no such app.
	AppOwner func(ctx context.Context, appID string) (string, error)
	// LinkApp returns the app of share link linkID, "" when there is no
	// such link.
	LinkApp func(ctx context.Context, linkID string) (string, error)
	// TTL bounds how long an answer is kept; default OwnerTTL.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time

	mu          sync.Mutex
	apps, links map[string]ownerName
	gen         uint64 // counts Moves, so that a read that raced one is not kept
}

type ownerName struct {
	name   string
	readAt time.Time
}

// Owner returns the owner userID counts against, "" for none. An error is
// a failed read, not an unknown app or link.
func (o *Owners) Owner(ctx context.Context, userID string) (string, error) {
	if rest, ok := strings.CutPrefix(userID, AppKeyPrefix); ok {
		appID, _, _ := strings.Cut(rest, ":")
		return o.appOwner(ctx, appID)
	}
	if rest, ok := strings.CutPrefix(userID, ShareLinkPrefix); ok {
		linkID, _, _ := strings.Cut(rest, ":")
		appID, err := o.read(ctx, &o.links, linkID, o.LinkApp)
		if err != nil || appID == "" {
			return "", err
		}
		return o.appOwner(ctx, appID)
	}
	return userID, nil
}

func (o *Owners) appOwner(ctx context.Context, appID string) (string, error) {
	return o.read(ctx, &o.apps, appID, o.AppOwner)
}

// Moved keeps owner as appID's owner: the app has just changed hands.
// (Rather than forgetting the app: a read of it may still find the old
// owner in a cache below AppOwner for a moment.)
func (o *Owners) Moved(appID, owner string) {
	o.mu.Lock()
	if o.apps == nil || len(o.apps) >= ownersLimit {
		o.apps = map[string]ownerName{}
	}
	o.apps[appID] = ownerName{name: owner, readAt: o.now()}
	o.gen++
	o.mu.Unlock()
}

// read answers id from cache when it is fresh, and from lookup otherwise.
func (o *Owners) read(ctx context.Context, cache *map[string]ownerName, id string, lookup func(context.Context, string) (string, error)) (string, error) {
	if id == "" {
		return "", nil
	}
	now := o.now()
	o.mu.Lock()
	c, ok := (*cache)[id]
	gen := o.gen
	o.mu.Unlock()
	if ok && now.Sub(c.readAt) < o.ttl() {
		return c.name, nil
	}
	if lookup == nil {
		return "", nil
	}
	name, err := lookup(ctx, id)
	if err != nil {
		return "", fmt.Errorf("find the owner: %w", err)
	}
	o.mu.Lock()
	if o.gen == gen {
		if *cache == nil || len(*cache) >= ownersLimit {
			*cache = map[string]ownerName{}
		}
		(*cache)[id] = ownerName{name: name, readAt: now}
	}
	o.mu.Unlock()
	return name, nil
}

func (o *Owners) ttl() time.Duration {
	if o.TTL > 0 {
		return o.TTL
	}
	return OwnerTTL
}

func (o *Owners) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
