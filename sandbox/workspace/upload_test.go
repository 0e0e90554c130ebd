package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// noLeftovers fails when staging holds anything: a refused or failed
// upload leaves nothing behind.
func noLeftovers(t *testing.T, s *Store, scope sandbox.Scope) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.chatDir(scope.SandboxID()), stagingDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("staging holds %d leftover files, want none", len(entries))
	}
}

func uploadNames(t *testing.T, s *Store, scope sandbox.Scope, dir string) []string {
	t.Helper()
	entries, err := s.List(context.Background(), scope, Uploads, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names
}

func TestSave(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	f, err := s.Save(ctx, scopeA, "", "报告 2026.csv", strings.NewReader("a,b\n1,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := File{Name: "报告 2026.csv", Path: "报告 2026.csv", SandboxPath: "/workspace/uploads/报告 2026.csv", Size: 8}
	if f != want {
		t.Errorf("Save = %+v, want %+v", f, want)
	}
	data, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), "报告 2026.csv"))
	if err != nil || string(data) != "a,b\n1,2\n" {
		t.Errorf("saved content = %q, %v; want the upload", data, err)
	}
	f, err = s.Save(ctx, scopeA, "/workspace/uploads/reports/q1", "x.txt", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if want := (File{Name: "x.txt", Path: "reports/q1/x.txt", SandboxPath: "/workspace/uploads/reports/q1/x.txt"}); f != want {
		t.Errorf("Save into a new folder = %+v, want %+v", f, want)
	}
	noLeftovers(t, s, scopeA)
}

func TestSaveNameAttacks(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		in   string
		want string // "" for a refusal
	}{
		{"dotdot", "../x", ""},
		{"absolute", "/etc/passwd", ""},
		{"slash", "a/b", ""},
		{"backslash", `a\b`, ""},
		{"NUL", "x\x00.txt", ""},
		{"dot", ".", ""},
		{"dotdot alone", "..", ""},
		{"empty", "", ""},
		{"control", "a\r\nb.txt", "a__b.txt"},
		{"300 bytes", strings.Repeat("x", 300) + ".csv", strings.Repeat("x", 251) + ".csv"},
		{"300 bytes multibyte", strings.Repeat("报", 100) + ".csv", strings.Repeat("报", 83) + ".csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, Config{})
			f, err := s.Save(ctx, scopeA, "", tt.in, strings.NewReader("x"))
			if tt.want == "" {
				if !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Fatalf("Save(%q) = %+v, %v; want ErrInvalidPath", tt.in, f, err)
				}
				if names := uploadNames(t, s, scopeA, ""); len(names) != 0 {
					t.Errorf("a refused upload left %v in uploads", names)
				}
				return
			}
			if err != nil || f.Name != tt.want {
				t.Fatalf("Save(%q) = %q, %v; want %q", tt.in, f.Name, err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(areaDir(s, scopeA, Uploads), tt.want)); err != nil {
				t.Errorf("the file is not under its name: %v", err)
			}
		})
	}
}

func TestSaveDirConfined(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	for _, dir := range []string{"../x", "/etc", "a/../../b", "/workspace/intermediate", "a\x00"} {
		if _, err := s.Save(ctx, scopeA, dir, "f.txt", strings.NewReader("x")); !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Save into %q = %v, want ErrInvalidPath", dir, err)
		}
	}
	if err := os.WriteFile(filepath.Join(areaDir(s, scopeA, Uploads), "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, scopeA, "file", "f.txt", strings.NewReader("x")); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("Save into a file = %v, want ErrInvalidPath", err)
	}
	noLeftovers(t, s, scopeA)
}

func TestSaveCollisions(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	var got []string
	for i := 0; i < 3; i++ {
		f, err := s.Save(ctx, scopeA, "", "data.csv", strings.NewReader(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Name)
	}
	if want := "data.csv,data (1).csv,data (2).csv"; strings.Join(got, ",") != want {
		t.Errorf("names = %v, want %s", got, want)
	}
	// A directory, and a link to nowhere, hold names too; none is replaced.
	up := areaDir(s, scopeA, Uploads)
	if err := os.Mkdir(filepath.Join(up, "x.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(up, "x (1).txt")); err != nil {
		t.Fatal(err)
	}
	f, err := s.Save(ctx, scopeA, "", "x.txt", strings.NewReader("x"))
	if err != nil || f.Name != "x (2).txt" {
		t.Errorf("Save over a directory and a dangling link = %q, %v; want x (2).txt", f.Name, err)
	}
	if data, _ := os.ReadFile(filepath.Join(up, "data.csv")); string(data) != "0" {
		t.Errorf("data.csv = %q, want the first upload", data)
	}
}

func TestSaveConcurrentSameName(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	const n = 20
	var wg sync.WaitGroup
	results := make([]File, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Save(ctx, scopeA, "", "data.csv", strings.NewReader(fmt.Sprintf("upload %d", i)))
		}()
	}
	wg.Wait()
	names := map[string]bool{}
	contents := map[string]bool{}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("upload %d: %v", i, errs[i])
		}
		names[results[i].Name] = true
		data, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), results[i].Name))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != fmt.Sprintf("upload %d", i) {
			t.Errorf("%s holds %q, want %q", results[i].Name, data, fmt.Sprintf("upload %d", i))
		}
		contents[string(data)] = true
	}
	if len(names) != n || len(contents) != n {
		t.Errorf("got %d distinct names and %d distinct contents, want %d of each", len(names), len(contents), n)
	}
	for i := 0; i < n; i++ {
		if !names[candidate("data.csv", i)] {
			t.Errorf("missing %q among %v", candidate("data.csv", i), names)
		}
	}
	if got := uploadNames(t, s, scopeA, ""); len(got) != n {
		t.Errorf("uploads holds %d files, want %d", len(got), n)
	}
	noLeftovers(t, s, scopeA)
}

func TestFileQuota(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		size    int
		refused bool
	}{
		{"empty", 0, false},
		{"exactly at the limit", 1000, false},
		{"one byte over", 1001, true},
		{"far over", 1 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, Config{MaxFileBytes: 1000})
			f, err := s.Save(ctx, scopeA, "", "report.csv", bytes.NewReader(make([]byte, tt.size)))
			if !tt.refused {
				if err != nil || f.Size != int64(tt.size) {
					t.Fatalf("Save of %d bytes = %+v, %v; want it kept", tt.size, f, err)
				}
				return
			}
			var qe *QuotaError
			if !errors.As(err, &qe) || qe.What != QuotaFile || qe.Limit != 1000 || !errors.Is(err, ErrQuota) || !errors.Is(err, sandbox.ErrTooLarge) {
				t.Fatalf("Save of %d bytes = %v, want a file *QuotaError matching ErrQuota and ErrTooLarge", tt.size, err)
			}
			if want := "file too large: report.csv is larger than 1000 B, the limit per file"; err.Error() != want {
				t.Errorf("message = %q, want %q", err, want)
			}
			if names := uploadNames(t, s, scopeA, ""); len(names) != 0 {
				t.Errorf("a refused upload left %v", names)
			}
			noLeftovers(t, s, scopeA)
		})
	}
}

func TestChatQuota(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{MaxFileBytes: 1500, MaxChatBytes: 2000})
	mustMounts(t, s, scopeA)
	// What the sandbox wrote counts.
	if err := os.WriteFile(filepath.Join(areaDir(s, scopeA, Intermediate), "out.bin"), make([]byte, 500), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, scopeA, "", "a.bin", bytes.NewReader(make([]byte, 1000))); err != nil {
		t.Fatalf("first upload: %v", err)
	}
	if _, err := s.Save(ctx, scopeA, "", "b.bin", bytes.NewReader(make([]byte, 500))); err != nil {
		t.Fatalf("upload that fills the chat exactly: %v", err)
	}
	_, err := s.Save(ctx, scopeA, "", "c.bin", strings.NewReader("x"))
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.What != QuotaChat || qe.Used != 2000 || qe.Limit != 2000 {
		t.Fatalf("upload past the chat's limit = %v, want a chat *QuotaError with 2000 used", err)
	}
	want := "not enough space in this chat for c.bin: its files already take 2 KiB of 2 KiB (uploads and intermediate files together); delete files it no longer needs and try again"
	if err.Error() != want {
		t.Errorf("message = %q, want %q", err, want)
	}
	if used, err := s.Usage(ctx, scopeA); err != nil || used != 2000 {
		t.Errorf("Usage = %d, %v; want 2000", used, err)
	}
	// Deleting frees space for the next upload.
	if err := s.Delete(ctx, scopeA, Intermediate, "out.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, scopeA, "", "c.bin", bytes.NewReader(make([]byte, 500))); err != nil {
		t.Errorf("upload after a deletion: %v", err)
	}
	noLeftovers(t, s, scopeA)
}

func TestFits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{MaxFileBytes: 100 << 20, MaxChatBytes: 150 << 20})
	err := s.Fits(ctx, scopeA, "report.csv", 120<<20)
	if want := "file too large: report.csv is 120 MiB, the limit per file is 100 MiB"; err == nil || err.Error() != want || !errors.Is(err, ErrQuota) {
		t.Errorf("Fits(120 MiB) = %v, want %q", err, want)
	}
	if err := s.Fits(ctx, scopeA, "a.csv", 100<<20); err != nil {
		t.Errorf("Fits(100 MiB) on an empty chat = %v, want nil", err)
	}
	mustMounts(t, s, scopeA)
	if err := os.WriteFile(filepath.Join(areaDir(s, scopeA, Intermediate), "big"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(areaDir(s, scopeA, Intermediate), "big"), 100<<20); err != nil {
		t.Fatal(err)
	}
	err = s.Fits(ctx, scopeA, "a.csv", 60<<20)
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.What != QuotaChat || qe.Used != 100<<20 || qe.Size != 60<<20 {
		t.Errorf("Fits(60 MiB) with 100 MiB used = %v, want a chat *QuotaError", err)
	}
	if err := s.Fits(ctx, scopeA, "a.csv", 50<<20); err != nil {
		t.Errorf("Fits(50 MiB) with 100 MiB used = %v, want nil", err)
	}
}

// Concurrent uploads reserve the chat's quota under one mutex: together
// they never pass it, and every one refused leaves nothing.
func TestChatQuotaConcurrent(t *testing.T) {
	ctx := context.Background()
	const limit, each, n = 1_000_000, 300_000, 8
	s := newStore(t, Config{MaxChatBytes: limit})
	var wg sync.WaitGroup
	errs := make([]error, n)
	files := make([]File, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Small reads interleave the uploads' reservations.
			r := io.LimitReader(&slowReader{b: byte('a' + i)}, each)
			files[i], errs[i] = s.Save(ctx, scopeA, "", fmt.Sprintf("f%d.bin", i), r)
		}()
	}
	wg.Wait()
	kept := 0
	for i := 0; i < n; i++ {
		switch {
		case errs[i] == nil:
			kept++
			data, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), files[i].Name))
			if err != nil || len(data) != each || data[0] != byte('a'+i) || data[each-1] != byte('a'+i) {
				t.Errorf("kept upload %d is not whole: %d bytes, %v", i, len(data), err)
			}
		case !errors.Is(errs[i], ErrQuota):
			t.Errorf("upload %d: %v, want success or ErrQuota", i, errs[i])
		}
	}
	// Three fit (900 kB); a fourth never does, and while three or fewer
	// are left nobody is refused.
	if kept != 3 {
		t.Errorf("%d uploads kept, want 3", kept)
	}
	if used, _ := s.Usage(ctx, scopeA); used > limit || used != int64(kept*each) {
		t.Errorf("Usage = %d after %d kept uploads of %d, limit %d", used, kept, each, limit)
	}
	if names := uploadNames(t, s, scopeA, ""); len(names) != kept {
		t.Errorf("uploads holds %v, want only the %d kept", names, kept)
	}
	noLeftovers(t, s, scopeA)
}

// slowReader gives one byte value in reads of at most 4 KiB.
type slowReader struct{ b byte }

func (r *slowReader) Read(p []byte) (int, error) {
	n := min(len(p), 4096)
	for i := range p[:n] {
		p[i] = r.b
	}
	return n, nil
}

type failingReader struct{ sent bool }

func (r *failingReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return copy(p, "partial"), nil
	}
	return 0, errors.New("connection reset")
}

func TestSaveFailureLeavesNothing(t *testing.T) {
	s := newStore(t, Config{MaxChatBytes: 100})
	ctx := context.Background()
	if _, err := s.Save(ctx, scopeA, "", "a.txt", &failingReader{}); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("Save from a failing reader = %v, want the read error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Save(cctx, scopeA, "", "b.txt", strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Save with a cancelled context = %v, want context.Canceled", err)
	}
	if names := uploadNames(t, s, scopeA, ""); len(names) != 0 {
		t.Errorf("failed uploads left %v", names)
	}
	noLeftovers(t, s, scopeA)
	// Their reservations were given back: the whole quota is free.
	if _, err := s.Save(ctx, scopeA, "", "c.txt", bytes.NewReader(make([]byte, 100))); err != nil {
		t.Errorf("Save of the whole quota after failures: %v", err)
	}
}

func TestStaleStagingSwept(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{MaxChatBytes: 1000})
	mustMounts(t, s, scopeA)
	staging := filepath.Join(s.chatDir(scopeA.SandboxID()), stagingDir)
	old := filepath.Join(staging, "crashed.part")
	fresh := filepath.Join(staging, "receiving.part")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, make([]byte, 400), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(old, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// 400 fresh + 600 fits; the crashed 400 is not counted.
	if _, err := s.Save(ctx, scopeA, "", "a.bin", bytes.NewReader(make([]byte, 600))); err != nil {
		t.Fatalf("Save: %v", err)
	}
	entries, _ := os.ReadDir(staging)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "receiving.part" {
		t.Errorf("staging holds %v, want only the fresh file", names)
	}
}

// gatedReader signals its first Read, then waits for the gate before
// giving its data.
type gatedReader struct {
	started chan struct{}
	gate    chan struct{}
	r       io.Reader
	once    sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.started)
		<-g.gate
	})
	return g.r.Read(p)
}

// An upload in flight in this process keeps its staging file, however old
// it looks, when another upload measures the chat.
func TestSweepSparesUploadsInFlight(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{MaxChatBytes: 1000})
	mustMounts(t, s, scopeA)
	g := &gatedReader{started: make(chan struct{}), gate: make(chan struct{}), r: strings.NewReader("slow upload")}
	done := make(chan error, 1)
	go func() {
		_, err := s.Save(ctx, scopeA, "", "slow.txt", g)
		done <- err
	}()
	<-g.started
	staging := filepath.Join(s.chatDir(scopeA.SandboxID()), stagingDir)
	entries, err := os.ReadDir(staging)
	if err != nil || len(entries) != 1 {
		t.Fatalf("staging holds %d files, %v; want the slow upload's", len(entries), err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(staging, entries[0].Name()), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, scopeA, "", "fast.txt", strings.NewReader("fast")); err != nil {
		t.Fatalf("fast upload: %v", err)
	}
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatalf("the slow upload failed: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), "slow.txt")); err != nil || string(data) != "slow upload" {
		t.Errorf("slow.txt = %q, %v; want the upload", data, err)
	}
}
