package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// Metrics are what a running sandbox uses (docs/SANDBOXES.md, "Metrics"),
// read from its cgroups and its disk. A value the provider cannot read is
// -1.
type Metrics struct {
	SampledAt time.Time `json:"sampledAt"`
	// CPUSeconds is the CPU time its processes have used since it
	// started; CPUPercent the share of one core it used since the
	// previous sample (Manager.Metrics; -1 for the first).
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPercent float64 `json:"cpuPercent"`
	// MemoryBytes is the memory charged to it (page cache included, as
	// its limit counts it), MemoryLimitBytes its limit (0: none).
	MemoryBytes      int64 `json:"memoryBytes"`
	MemoryLimitBytes int64 `json:"memoryLimitBytes"`
	Processes        int64 `json:"processes"`
	// DiskBytes is what its writable files take, DiskLimitBytes the size
	// of its disk image (0: no disk limit).
	DiskBytes      int64 `json:"diskBytes"`
	DiskLimitBytes int64 `json:"diskLimitBytes"`
}

// MetricsProvider is a provider that can read its running sandboxes'
// metrics: ErrNotRunning for a stopped sandbox, ErrNotFound for a missing
// one.
type MetricsProvider interface {
	Metrics(ctx context.Context, id string) (Metrics, error)
}

// maxDiskWalk bounds the entries DirUsage counts: a workspace of more is
// reported at that count's size (a disk limit's image is read at once).
const maxDiskWalk = 200_000

// DirUsage is the disk space the files under dir take (their allocated
// blocks, each inode once), counting at most maxDiskWalk entries. Links
// are not followed.
func DirUsage(dir string) int64 {
	var total int64
	n := 0
	seen := map[uint64]bool{}
	errStop := errors.New("enough")
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if n++; n > maxDiskWalk {
			return errStop
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if st.Nlink > 1 {
				if seen[st.Ino] {
					return nil
				}
				seen[st.Ino] = true
			}
			total += st.Blocks * 512
			return nil
		}
		total += info.Size()
		return nil
	})
	return total
}

// FSUsage is the space used and the size of the filesystem mounted at dir
// (a sandbox's disk image); ok is false when it cannot be read.
func FSUsage(dir string) (used, size int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	bs := int64(st.Bsize)
	return (int64(st.Blocks) - int64(st.Bfree)) * bs, int64(st.Blocks) * bs, true
}

// lastSample is a sandbox's previous metrics, for its CPU share.
type lastSample struct {
	at  time.Time
	cpu float64
}

// Metrics reads the scope's sandbox's metrics when it runs; ErrNotRunning
// when it does not (ErrNotFound when the chat has none), ErrUnsupported
// when the provider reads none. It starts nothing and is no use of the
// sandbox (it does not keep it from its idle stop).
func (m *Manager) Metrics(ctx context.Context, scope Scope) (Metrics, error) {
	if err := scope.validate(); err != nil {
		return Metrics{}, err
	}
	return m.MetricsOf(ctx, scope.SandboxID())
}

// MetricsOf is Metrics by the sandbox's id, for admins.
func (m *Manager) MetricsOf(ctx context.Context, sandboxID string) (Metrics, error) {
	mp, ok := m.cfg.Provider.(MetricsProvider)
	if !ok {
		return Metrics{}, fmt.Errorf("%w: the %s provider reads no metrics", ErrUnsupported, m.cfg.Provider.Name())
	}
	s, err := mp.Metrics(ctx, sandboxID)
	if err != nil {
		return Metrics{}, err
	}
	s.CPUPercent = -1
	if prev, ok := m.samples.Load(sandboxID); ok {
		p := prev.(lastSample)
		if dt := s.SampledAt.Sub(p.at).Seconds(); dt > 0 && s.CPUSeconds >= p.cpu && p.cpu >= 0 {
			s.CPUPercent = 100 * (s.CPUSeconds - p.cpu) / dt
		}
	}
	if s.CPUSeconds >= 0 {
		m.samples.Store(sandboxID, lastSample{at: s.SampledAt, cpu: s.CPUSeconds})
	}
	return s, nil
}

// Running is nil when the provider's sandbox id runs, an error wrapping
// ErrNotFound when it does not exist, ErrNotRunning when it is stopped.
func Running(ctx context.Context, p Provider, id string) error {
	switch st, err := p.Status(ctx, id); {
	case err != nil:
		return err
	case st == StatusMissing:
		return fmt.Errorf("%s sandbox %s: %w", p.Name(), id, ErrNotFound)
	case st == StatusStopped:
		return fmt.Errorf("%s sandbox %s: %w", p.Name(), id, ErrNotRunning)
	}
	return nil
}
