package workspace

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/flowbox/flowbox/sandbox"
)

const (
	// maxNameBytes is what Linux file systems take in one name.
	maxNameBytes = 255
	// maxExtBytes: a longer "extension" is part of the name, and a
	// truncation may cut it.
	maxExtBytes = 32
)

// CleanName turns an uploaded file's name into the name it is saved
// under, or says why it cannot be one. It refuses what cannot be a name
// or hints at a path (empty, ".", "..", "/", "\", NUL), and cleans the
// rest: invalid UTF-8, control characters and bidirectional overrides
// become "_" (they would break or disguise the name in listings and in the
// prompt), the name is put in Unicode NFC, leading blanks and trailing
// blanks and dots are removed, and a name over 255 bytes is cut at a
// character boundary, keeping its extension. Letters of every script stay:
// "报告 2026.csv" is saved as it is.
func CleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("%w: the file name is empty; give the file a name", sandbox.ErrInvalidPath)
	case name == "." || name == "..":
		return "", fmt.Errorf("%w: %q is not a file name; give the file a name", sandbox.ErrInvalidPath, name)
	case strings.IndexByte(name, 0) >= 0:
		return "", fmt.Errorf("%w: the file name %q contains a NUL byte; rename the file", sandbox.ErrInvalidPath, name)
	case strings.ContainsAny(name, `/\`):
		return "", fmt.Errorf("%w: the file name %q contains / or \\; give only the name, and the folder separately", sandbox.ErrInvalidPath, name)
	}
	clean := strings.ToValidUTF8(name, "_")
	clean = norm.NFC.String(clean)
	clean = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || isBidiControl(r) {
			return '_'
		}
		return r
	}, clean)
	clean = strings.TrimLeftFunc(clean, unicode.IsSpace)
	clean = strings.TrimRightFunc(clean, func(r rune) bool { return r == '.' || unicode.IsSpace(r) })
	if clean == "" {
		return "", fmt.Errorf("%w: the file name %q has nothing left once blanks and trailing dots are removed; give the file a name", sandbox.ErrInvalidPath, name)
	}
	return fitName(clean, ""), nil
}

// isBidiControl reports the characters that reorder text on screen and
// can make "exe.csv" look like "vsc.exe".
func isBidiControl(r rune) bool {
	switch {
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e':
		return true
	case r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// splitExt splits "data.csv" into "data" and ".csv". A leading dot (".env")
// and a long or spaced tail are not extensions.
func splitExt(name string) (stem, ext string) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return name, ""
	}
	ext = name[i:]
	if len(ext) > maxExtBytes || strings.ContainsFunc(ext, unicode.IsSpace) {
		return name, ""
	}
	return name[:i], ext
}

// fitName inserts suffix before name's extension and cuts the stem at a
// character boundary so that the result fits in maxNameBytes.
func fitName(name, suffix string) string {
	stem, ext := splitExt(name)
	budget := maxNameBytes - len(suffix) - len(ext)
	if len(stem) > budget {
		cut := budget
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		stem = stem[:cut]
	}
	return stem + suffix + ext
}

// candidate is the n-th name tried for name: name itself, then
// "data (1).csv", "data (2).csv", ...
func candidate(name string, n int) string {
	if n == 0 {
		return name
	}
	return fitName(name, " ("+strconv.Itoa(n)+")")
}

// relPath turns a path inside area, given relative to it or absolute as
// the sandbox sees it (/workspace/uploads/...), into a clean relative path
// ("." for the area itself). It refuses NUL, ".." and anything outside the
// area; links are the os.Root's to judge.
func relPath(area Area, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: the path %q contains a NUL byte", sandbox.ErrInvalidPath, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q: \"..\" is not allowed; give a path inside %s", sandbox.ErrInvalidPath, p, area.Target())
		}
	}
	if strings.HasPrefix(p, "/") {
		clean := path.Clean(p)
		if clean == area.Target() {
			return ".", nil
		}
		rest, ok := strings.CutPrefix(clean, area.Target()+"/")
		if !ok {
			return "", fmt.Errorf("%w: %q is outside %s", sandbox.ErrInvalidPath, p, area.Target())
		}
		return rest, nil
	}
	if p == "" {
		return ".", nil
	}
	return path.Clean(p), nil
}

// sandboxPath is where rel inside area appears in the sandbox.
func sandboxPath(area Area, rel string) string {
	if rel == "." || rel == "" {
		return area.Target()
	}
	return area.Target() + "/" + rel
}
