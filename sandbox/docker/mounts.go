package docker

import (
	"path/filepath"
	"strings"
)

// PathMap is a directory of the engine's as the engine and as the Docker
// daemon see it.
type PathMap struct {
	// Engine is the directory as this process sees it.
	Engine string
	// Daemon is the same directory as the Docker daemon sees it.
	Daemon string
}

// daemonPath is where the daemon sees the engine's path src: under the
// Daemon directory of the PathMap with the longest Engine directory that
// holds src, else src itself.
func daemonPath(maps []PathMap, src string) string {
	best, rest := -1, ""
	for i, m := range maps {
		r, ok := strings.CutPrefix(src, m.Engine)
		if !ok || (r != "" && r[0] != '/' && m.Engine != "/") {
			continue
		}
		if best < 0 || len(m.Engine) > len(maps[best].Engine) {
			best, rest = i, r
		}
	}
	if best < 0 {
		return src
	}
	return filepath.Join(maps[best].Daemon, rest)
}
