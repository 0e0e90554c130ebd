package docs

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The repository's root, seen from this package's directory.
const root = ".."

var (
	// listedRe is an entry of FEATURES.md: a list item that opens with
	// the ID in bold.
	listedRe = regexp.MustCompile(`(?m)^- \*\*([A-Z][0-9]{1,2})\*\*`)
	// idRe is anything shaped like a feature ID; cites decides from its
	// context whether it is cited as one.
	idRe = regexp.MustCompile(`\b[A-Z][0-9]{1,2}\b`)
	// rangeRe is a range of one family, "X1–X4" or "K1-K3".
	rangeRe = regexp.MustCompile(`\b([A-Z])([0-9]{1,2}) ?[–-] ?([A-Z])([0-9]{1,2})\b`)
)

// listed reads the IDs FEATURES.md lists.
func listed(t *testing.T) map[string]bool {
	t.Helper()
	page, err := os.ReadFile("FEATURES.md")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range listedRe.FindAllStringSubmatch(string(page), -1) {
		if ids[m[1]] {
			t.Errorf("docs/FEATURES.md lists %s twice", m[1])
		}
		ids[m[1]] = true
	}
	if len(ids) == 0 {
		t.Fatal(`docs/FEATURES.md lists no IDs (entries are lines "- **K4** what it is ...")`)
	}
	return ids
}

// citation is an ID cited at an offset of a text.
type citation struct {
	id  string
	off int
}

// cites finds the feature IDs text cites, in the ways the code and the
// pages cite them: in parentheses ("(K4)", "(N6, X1–X4)", "(SPEC T5/T8,
// issue 28)", "(S12,\n B4)"), as a range of one family ("K1–K4": every
// ID of it), in the possessive ("S1's formula") and opening a line before
// a colon ("N5: the node ends ..."). A name mentioned otherwise, such as a
// test's app named A1, is not taken for a citation. Parentheses do not
// carry over a blank line.
func cites(text string) []citation {
	var out []citation
	seen := map[int]bool{}
	for _, m := range rangeRe.FindAllStringSubmatchIndex(text, -1) {
		fam, lo, hi := text[m[2]:m[3]], atoi(text[m[4]:m[5]]), atoi(text[m[8]:m[9]])
		if text[m[6]:m[7]] != fam || lo > hi {
			continue
		}
		for n := lo; n <= hi; n++ {
			out = append(out, citation{fam + strconv.Itoa(n), m[0]})
		}
		seen[m[2]], seen[m[6]] = true, true
	}
	depth := make([]int, len(text)+1) // parentheses open before each offset
	d := 0
	for i := 0; i < len(text); i++ {
		depth[i] = d
		switch {
		case text[i] == '(':
			d++
		case text[i] == ')' && d > 0:
			d--
		case strings.HasPrefix(text[i:], "\n\n"):
			d = 0
		}
	}
	for _, m := range idRe.FindAllStringIndex(text, -1) {
		if seen[m[0]] {
			continue
		}
		before, _ := utf8.DecodeLastRuneInString(text[:m[0]])
		after, _ := utf8.DecodeRuneInString(text[m[1]:])
		lineStart := strings.LastIndexByte(text[:m[0]], '\n') + 1
		cited := false
		switch {
		case depth[m[0]] > 0:
			cited = (m[0] == 0 || strings.ContainsRune("( \t\n,/;", before)) &&
				(m[1] == len(text) || strings.ContainsRune(") \t\n,/;:.'’", after))
		case strings.HasPrefix(text[m[1]:], "'s") || strings.HasPrefix(text[m[1]:], "’s"):
			cited = m[0] == 0 || unicode.IsSpace(before)
		case after == ':':
			cited = strings.TrimSpace(text[lineStart:m[0]]) == ""
		}
		if cited {
			out = append(out, citation{text[m[0]:m[1]], m[0]})
		}
	}
	return out
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// commentBlock is the text of a comment, or of a run of line comments on
// consecutive lines, without the comment markers; line gives the line of
// each offset.
type commentBlock struct {
	text   strings.Builder
	starts []int // offset of each line's start in text
	first  int   // line of starts[0]
}

func (b *commentBlock) line(off int) int {
	i, found := slices.BinarySearch(b.starts, off)
	if !found {
		i--
	}
	return b.first + i
}

// comments returns the comments of a Go source file.
func comments(path string, src []byte) []*commentBlock {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(path, -1, len(src)), src, nil, scanner.ScanComments)
	var blocks []*commentBlock
	var cur *commentBlock
	lastLine := -2
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		line := fset.Position(pos).Line
		lineComment := strings.HasPrefix(lit, "//")
		if cur == nil || !lineComment || line != lastLine+1 {
			cur = &commentBlock{first: line}
			blocks = append(blocks, cur)
		}
		body := strings.TrimPrefix(lit, "//")
		if !lineComment {
			body = strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")
		}
		for i, l := range strings.Split(body, "\n") {
			cur.starts = append(cur.starts, cur.text.Len())
			cur.text.WriteString(l)
			cur.text.WriteByte('\n')
			lastLine = line + i
		}
		if !lineComment {
			cur = nil
		}
	}
	return blocks
}

// goFiles walks the repository for Go files, leaving out what the go
// command leaves out and the directories .gitignore names.
func goFiles(t *testing.T, visit func(path string, src []byte)) {
	t.Helper()
	ignored := map[string]bool{"bin": true, "dist": true, "data": true, "tmp": true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules" || filepath.Dir(path) == root && ignored[name]) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		visit(path, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rel names path from the repository's root, as in the failures.
func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// TestFeatureIDsResolve: every feature ID a comment of the code cites
// ("(K4)", "(N6, X1–X4)", "S1's formula") is listed in docs/FEATURES.md,
// and so is every ID of a listed family the pages cite.
func TestFeatureIDsResolve(t *testing.T) {
	ids := listed(t)
	unknown := func(where, id string) {
		t.Errorf("%s: cites %s, which docs/FEATURES.md does not list: add it there "+
			"(a line \"- **%s** what it is ([PAGE.md](PAGE.md))\" under its family), "+
			"or correct the comment", where, id, id)
	}
	cited := map[string]int{}
	goFiles(t, func(path string, src []byte) {
		for _, b := range comments(path, src) {
			for _, c := range cites(b.text.String()) {
				cited[c.id]++
				if !ids[c.id] {
					unknown(fmt.Sprintf("%s:%d", rel(path), b.line(c.off)), c.id)
				}
			}
		}
	})
	if len(cited) == 0 {
		t.Fatal("no comment of the repository cites a feature ID: the scan is broken")
	}

	// The pages also say things like "GKE Dataplane V2": there only IDs of
	// the families FEATURES.md lists count.
	families := map[byte]bool{}
	for id := range ids {
		families[id[0]] = true
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, filepath.Join(root, "README.md")) {
		if page == "FEATURES.md" {
			continue
		}
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := "docs/" + page
		if strings.HasPrefix(page, root) {
			name = rel(page)
		}
		text := string(src)
		for _, c := range cites(text) {
			if families[c.id[0]] && !ids[c.id] {
				unknown(fmt.Sprintf("%s:%d", name, strings.Count(text[:c.off], "\n")+1), c.id)
			}
		}
	}
	t.Logf("%d IDs cited in comments, %d listed", len(cited), len(ids))
}

// TestCites: what cites takes for a citation, and what it leaves.
func TestCites(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"the skill tools (K4).", []string{"K4"}},
		{"tools (N6, X1–X4).", []string{"X1", "X2", "X3", "X4", "N6"}},
		{"the workspace (K1-K3): uploads", []string{"K1", "K2", "K3"}},
		{"judged (P5,\n P6, P10): a Policy", []string{"P5", "P6", "P10"}},
		{"(SPEC T5/T8, issue 28)", []string{"T5", "T8"}},
		{"under S1's formula", []string{"S1"}},
		{" N5: the node ends", []string{"N5"}},
		{"(issue: workspace, K5)", []string{"K5"}},
		{"apps A1 and A2 of share link L1", nil},
		{"matches ^[a-zA-Z0-9_-]{1,64}$ (^[a-zA-Z0-9_-]{1,64}$)", nil},
		{"(GKE Dataplane V2, EKS)", []string{"V2"}},
		{"(an unclosed one\n\nA1: after a blank line", []string{"A1"}},
		{"(an unclosed one\n\nsays A1 after a blank line", nil},
	} {
		var got []string
		for _, c := range cites(tc.text) {
			got = append(got, c.id)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("cites(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`^#{1,6} +(.+?) *#*$`)
)

// anchors gives the anchors of a Markdown page's headings as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		m := headingRe.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestFeatureLinks: every link of docs/FEATURES.md reaches a page of the
// repository, and the heading it names.
func TestFeatureLinks(t *testing.T) {
	page, err := os.ReadFile("FEATURES.md")
	if err != nil {
		t.Fatal(err)
	}
	links := linkRe.FindAllStringSubmatch(string(page), -1)
	if len(links) == 0 {
		t.Fatal("docs/FEATURES.md links to no page")
	}
	for _, m := range links {
		target, anchor, _ := strings.Cut(m[1], "#")
		if strings.Contains(target, "://") {
			continue
		}
		src, err := os.ReadFile(filepath.FromSlash(target))
		if err != nil {
			t.Errorf("docs/FEATURES.md links to %s: %v", m[1], err)
			continue
		}
		if anchor != "" && !anchors(string(src))[anchor] {
			t.Errorf("docs/FEATURES.md links to %s: %s has no heading #%s", m[1], target, anchor)
		}
	}
}
