package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// CheckMounts says what is wrong with a spec's mounts before a provider
// creates anything: each source an existing directory named by an
// absolute path, each target a clean path under /workspace, no two
// targets the same or one inside another (the inner one's mount point
// would be made in the outer one's source, a directory of the engine's).
// It returns the mounts with clean sources. Every provider applies it in
// Ensure.
func CheckMounts(mounts []Mount) ([]Mount, error) {
	out := make([]Mount, 0, len(mounts))
	for _, m := range mounts {
		what := fmt.Sprintf("mount of %q at %q", m.Source, m.Target)
		if !filepath.IsAbs(m.Source) {
			return nil, fmt.Errorf("%s: the source must be an absolute path as the engine sees it", what)
		}
		switch fi, err := os.Stat(m.Source); {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%s: the source does not exist; create the directory before the sandbox", what)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", what, err)
		case !fi.IsDir():
			return nil, fmt.Errorf("%s: the source is not a directory", what)
		}
		rel, under := strings.CutPrefix(m.Target, WorkspaceDir+"/")
		if !under || rel == "" || path.Clean(m.Target) != m.Target || strings.IndexByte(m.Target, 0) >= 0 {
			return nil, fmt.Errorf("%s: the target must be a clean absolute path under %s, such as %s", what, WorkspaceDir, UploadsDir)
		}
		for _, o := range out {
			switch {
			case o.Target == m.Target:
				return nil, fmt.Errorf("%s: another mount has the same target", what)
			case strings.HasPrefix(m.Target, o.Target+"/"):
				return nil, fmt.Errorf("%s: the target is inside the mount at %q; mounts must not nest", what, o.Target)
			case strings.HasPrefix(o.Target, m.Target+"/"):
				return nil, fmt.Errorf("%s: the mount at %q is inside the target; mounts must not nest", what, o.Target)
			}
		}
		m.Source = filepath.Clean(m.Source)
		out = append(out, m)
	}
	return out, nil
}
