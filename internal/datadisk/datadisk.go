// Package datadisk keeps the engine's data disk from filling up (T4): a
// Guard says when the filesystems under the engine's directories (the
// data directory with the embedded database, the chats' files, the
// sandboxes) have less free space than the operator's minimum, so that
// the engine refuses uploads, file writes and new sandboxes while its
// database still has room to work, and /readyz says why.
//
// It must never write to the disk it watches, and never refuse a read
// or a deletion: those are how an operator or a user makes room.
package datadisk

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ErrLow matches every *LowError.
var ErrLow = errors.New("the engine's data disk is almost full")

// LowError says which directory's filesystem is short of space.
type LowError struct {
	Path    string
	Free    int64 // bytes available to the engine
	MinFree int64 // bytes the guard keeps free
}

func (e *LowError) Error() string {
	return fmt.Sprintf("the server's data disk is almost full (%s free under %s, %s kept free for the database): "+
		"writes and new sandboxes are refused until an operator makes room; delete files you no longer need or try again later",
		human(e.Free), e.Path, human(e.MinFree))
}

func (e *LowError) Is(target error) bool { return target == ErrLow }

// Limit is a minimum of free space: bytes, or a percentage of the
// filesystem's size.
type Limit struct {
	Bytes   int64
	Percent float64
}

// IsZero reports no minimum (the guard is off).
func (l Limit) IsZero() bool { return l.Bytes <= 0 && l.Percent <= 0 }

func (l Limit) String() string {
	if l.Percent > 0 {
		return strconv.FormatFloat(l.Percent, 'f', -1, 64) + "%"
	}
	return human(l.Bytes)
}

// ParseLimit reads "2GiB", "512MiB", "10%" or "0" (off).
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return Limit{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f <= 0 || f >= 100 {
			return Limit{}, fmt.Errorf("%q: use a percentage between 0 and 100, such as 5%%", s)
		}
		return Limit{Percent: f}, nil
	}
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
			if err != nil || v < 0 || v > 1<<20 {
				break
			}
			return Limit{Bytes: v << u.shift}, nil
		}
	}
	return Limit{}, fmt.Errorf("%q: use a size such as 2GiB or 512MiB, a percentage such as 5%%, or 0 to turn the guard off", s)
}

// Guard checks the free space under its paths.
type Guard struct {
	// Paths are the directories whose filesystems are watched; a path
	// that does not exist yet is skipped.
	Paths []string
	// Min is the free space kept; zero turns the guard off.
	Min Limit
}

// Check returns a *LowError when a watched filesystem has less free space
// than the minimum. It costs one statfs per path: cheap enough for every
// write.
func (g *Guard) Check() error {
	if g == nil || g.Min.IsZero() {
		return nil
	}
	for _, p := range g.Paths {
		var st syscall.Statfs_t
		if err := syscall.Statfs(p, &st); err != nil {
			continue // not made yet: nothing written there either
		}
		free := int64(st.Bavail) * int64(st.Bsize)
		min := g.Min.Bytes
		if g.Min.Percent > 0 {
			min = int64(float64(int64(st.Blocks)*int64(st.Bsize)) * g.Min.Percent / 100)
		}
		if free < min {
			return &LowError{Path: p, Free: free, MinFree: min}
		}
	}
	return nil
}

// Ready is Check for /readyz.
func (g *Guard) Ready(ctx context.Context) error { return g.Check() }

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatInt(n>>10, 10) + " KiB"
}
