package mongostore

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"
)

// busyBudget bounds how long a write that the embedded database refuses as
// busy is tried again. A write there holds the database for as long as it
// takes SQLite to read the whole collection (about a second at 100,000
// records), so the budget covers a queue of such writes.
const busyBudget = 30 * time.Second

// write runs op, and runs it again when the embedded FerretDB reports its
// SQLite database busy. Its write transactions start deferred, so when two
// writers overlap one of them fails at once with SQLITE_BUSY instead of
// waiting; the failed write changed nothing, so trying again is safe.
// MongoDB never reports it.
func write(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(busyBudget)
	wait := 5 * time.Millisecond
	for {
		err := op()
		if err == nil || !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-time.After(wait + rand.N(wait)):
		case <-ctx.Done():
			return err
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func isBusy(err error) bool { return strings.Contains(err.Error(), "SQLITE_BUSY") }
