package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummaryEmpty(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	want := "There are no files in /workspace/uploads or /workspace/intermediate yet."
	for _, step := range []string{"no workspace yet", "after Mounts"} {
		if step == "after Mounts" {
			mustMounts(t, s, scopeA)
		}
		sum, err := s.Summary(ctx, scopeA, 10)
		if err != nil || !sum.Empty() || sum.String() != want {
			t.Errorf("%s: Summary = %+v %q, %v; want empty, %q", step, sum, sum, err, want)
		}
	}
	if _, err := os.Lstat(s.chatDir(scopeB.SandboxID())); err == nil {
		t.Error("Summary created a directory")
	}
}

func TestSummary(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	up, in := areaDir(s, scopeA, Uploads), areaDir(s, scopeA, Intermediate)
	writeFile(t, filepath.Join(up, "b.csv"), 10)
	writeFile(t, filepath.Join(up, "a", "x.txt"), 2048)
	writeFile(t, filepath.Join(up, "报告 2026.csv"), 1536)
	writeFile(t, filepath.Join(in, "out.json"), 3<<20/2)
	if err := os.Symlink("out.json", filepath.Join(in, "latest")); err != nil {
		t.Fatal(err)
	}
	// A name the sandbox made to forge prompt lines is shown escaped.
	writeFile(t, filepath.Join(in, "x`\n- /etc/shadow (1 B)"), 1)
	if err := os.Mkdir(filepath.Join(in, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}

	sum, err := s.Summary(ctx, scopeA, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Files in this chat's workspace (/workspace/uploads: uploaded by the user; /workspace/intermediate: written by earlier steps):",
		"- `/workspace/uploads/a/x.txt` (2 KiB)",
		"- `/workspace/uploads/b.csv` (10 B)",
		"- `/workspace/uploads/报告 2026.csv` (1.5 KiB)",
		"- `/workspace/intermediate/latest` (link)",
		"- `/workspace/intermediate/out.json` (1.5 MiB)",
		`- "/workspace/intermediate/x` + "`" + `\n- /etc/shadow (1 B)" (1 B)`,
	}, "\n")
	if got := sum.String(); got != want {
		t.Errorf("Summary =\n%s\nwant\n%s", got, want)
	}

	sum, err = s.Summary(ctx, scopeA, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Files) != 2 || sum.More != 4 || sum.MoreAtLeast {
		t.Errorf("Summary(2) = %d files, %d more (at least: %v); want 2, 4, false", len(sum.Files), sum.More, sum.MoreAtLeast)
	}
	if !strings.HasSuffix(sum.String(), "\n- and 4 more files (run `find /workspace/uploads /workspace/intermediate -type f` to see them all)") {
		t.Errorf("Summary(2) does not end with the count of the rest:\n%s", sum)
	}
}

// However many files the sandbox made, a summary reads a bounded number of
// entries and says the count is a lower bound.
func TestSummaryBounded(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	up, in := areaDir(s, scopeA, Uploads), areaDir(s, scopeA, Intermediate)
	writeFile(t, filepath.Join(up, "data.csv"), 1)
	const many = summaryScanCap + 500
	for i := 0; i < many; i++ {
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := s.Summary(ctx, scopeA, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Files) != 5 || sum.Files[0].Path != "/workspace/uploads/data.csv" || sum.Files[1].Path != "/workspace/intermediate/f00000" {
		t.Errorf("Summary files = %+v, want data.csv then f00000...", sum.Files)
	}
	if !sum.MoreAtLeast || len(sum.Files)+sum.More != summaryScanCap {
		t.Errorf("Summary counted %d + %d (at least: %v), want %d in all, marked as a lower bound", len(sum.Files), sum.More, sum.MoreAtLeast, summaryScanCap)
	}
	if !strings.Contains(sum.String(), fmt.Sprintf("- and more than %d more files", sum.More)) {
		t.Errorf("Summary does not say the count is a lower bound:\n%s", sum)
	}
}

func BenchmarkSummary(b *testing.B) {
	s, err := New(Config{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Mounts(ctx, scopeA); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		p := filepath.Join(areaDir(s, scopeA, Intermediate), fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%03d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Summary(ctx, scopeA, DefaultSummaryEntries); err != nil {
			b.Fatal(err)
		}
	}
}
