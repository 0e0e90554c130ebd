package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"unicode"

	"github.com/flowbox/flowbox/sandbox"
)

// DefaultSummaryEntries is how many files Summary lists when asked for
// none or fewer.
const DefaultSummaryEntries = 50

// summaryScanCap bounds the entries a summary reads, whatever the chat
// holds: past it, the count of the rest is a lower bound ("more than").
const summaryScanCap = 10000

// Summary describes what a chat's uploads and intermediate directories
// hold, for the system prompt (K3).
type Summary struct {
	// Files are the first files, uploads first, then intermediate, each
	// depth-first in name order.
	Files []SummaryFile
	// More is how many more files were counted beyond Files.
	More int
	// MoreAtLeast: the count stopped at its bound, and there are at least
	// More more.
	MoreAtLeast bool
}

// SummaryFile is one file of a Summary.
type SummaryFile struct {
	// Path is where the sandbox sees it (/workspace/uploads/data.csv).
	Path string
	Size int64
	// Link: it is a symbolic link the sandbox made (Size is the link's).
	Link bool
}

// Empty reports whether the chat holds no files.
func (s Summary) Empty() bool { return len(s.Files) == 0 && s.More == 0 }

// String renders the summary for the system prompt. Paths that could
// break the prompt's layout or disguise themselves (control characters,
// bidirectional overrides, backquotes) are shown quoted with escapes.
func (s Summary) String() string {
	if s.Empty() {
		return "There are no files in " + sandbox.UploadsDir + " or " + sandbox.IntermediateDir + " yet."
	}
	var b strings.Builder
	b.WriteString("Files in this chat's workspace (" + sandbox.UploadsDir + ": uploaded by the user; " + sandbox.IntermediateDir + ": written by earlier steps):\n")
	for _, f := range s.Files {
		b.WriteString("- ")
		b.WriteString(promptPath(f.Path))
		if f.Link {
			b.WriteString(" (link)\n")
		} else {
			b.WriteString(" (" + HumanSize(f.Size) + ")\n")
		}
	}
	if s.More > 0 || s.MoreAtLeast {
		more := ""
		if s.MoreAtLeast {
			more = "more than "
		}
		noun := "files"
		if s.More == 1 && !s.MoreAtLeast {
			noun = "file"
		}
		fmt.Fprintf(&b, "- and %s%d more %s (run `find %s %s -type f` to see them all)\n", more, s.More, noun, sandbox.UploadsDir, sandbox.IntermediateDir)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// promptPath shows p in backquotes when every character is plainly
// visible, quoted with Go escapes otherwise.
func promptPath(p string) string {
	plain := !strings.ContainsFunc(p, func(r rune) bool {
		return r == '`' || r == unicode.ReplacementChar || isBidiControl(r) || !unicode.IsGraphic(r)
	})
	if plain {
		return "`" + p + "`"
	}
	return strconv.QuoteToGraphic(p)
}

// Summary lists the first maxEntries files of the chat's uploads and
// intermediate directories, and counts the rest, without starting the
// sandbox. It runs every turn, so it reads at most summaryScanCap entries
// and stats only the files it lists. A chat without a workspace yet has an
// empty summary.
func (s *Store) Summary(ctx context.Context, scope sandbox.Scope, maxEntries int) (Summary, error) {
	if err := checkScope(scope); err != nil {
		return Summary{}, err
	}
	if maxEntries <= 0 {
		maxEntries = DefaultSummaryEntries
	}
	var sum Summary
	budget := summaryScanCap
	for _, area := range []Area{Uploads, Intermediate} {
		root, err := s.openArea(scope.SandboxID(), area)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Summary{}, fmt.Errorf("summarise %s: %w", area.Target(), err)
		}
		w := walker{root: root, budget: budget, visit: func(rel string, de fs.DirEntry) error {
			t := de.Type()
			if !t.IsRegular() && t&fs.ModeSymlink == 0 {
				return nil
			}
			if len(sum.Files) >= maxEntries {
				sum.More++
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			sum.Files = append(sum.Files, SummaryFile{Path: sandboxPath(area, rel), Size: fi.Size(), Link: t&fs.ModeSymlink != 0})
			return nil
		}}
		err = w.walk(ctx)
		root.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Summary{}, fmt.Errorf("summarise %s: %w", area.Target(), err)
		}
		budget = w.budget
		if w.cut {
			sum.MoreAtLeast = true
			break
		}
	}
	return sum, nil
}

// HumanSize writes a byte count as people read it: "512 B", "1.5 KiB",
// "100 MiB".
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTPE"[exp]) + "iB"
}
