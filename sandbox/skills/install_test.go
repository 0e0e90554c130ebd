package skills_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowbox/flowbox/sandbox/skills"
)

func TestInstallLayouts(t *testing.T) {
	tests := []struct {
		name      string
		files     []zfile
		wantFiles []string
	}{
		{name: "files at the root", files: []zfile{
			{name: "SKILL.md", body: skillMD("s", "")},
			{name: "scripts/run.py", body: "print(1)"},
		}, wantFiles: []string{"SKILL.md", "scripts/run.py"}},
		{name: "one top-level folder", files: []zfile{
			{name: "s/"}, {name: "s/SKILL.md", body: skillMD("s", "")},
			{name: "s/references/"}, {name: "s/references/r.md", body: "r"},
		}, wantFiles: []string{"SKILL.md", "references/r.md"}},
		{name: "folder without directory entries", files: []zfile{
			{name: "s/SKILL.md", body: skillMD("s", "")}, {name: "s/assets/a.txt", body: "a"},
		}, wantFiles: []string{"SKILL.md", "assets/a.txt"}},
		{name: "macOS Finder archive", files: []zfile{
			{name: "s/SKILL.md", body: skillMD("s", "")}, {name: "__MACOSX/s/._SKILL.md", body: "junk"},
			{name: "s/.DS_Store", body: "junk"},
		}, wantFiles: []string{"SKILL.md"}},
		{name: "Windows separators", files: []zfile{
			{name: `s\SKILL.md`, body: skillMD("s", "")}, {name: `s\scripts\run.py`, body: "print(1)"},
		}, wantFiles: []string{"SKILL.md", "scripts/run.py"}},
		{name: "leading ./", files: []zfile{
			{name: "./SKILL.md", body: skillMD("s", "")},
		}, wantFiles: []string{"SKILL.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, skills.Config{})
			s := mustInstall(t, c, zipOf(t, tt.files...))
			if s.Name != "s" || s.Version != 1 || !reflect.DeepEqual(s.Files, tt.wantFiles) {
				t.Errorf("installed %+v, want s version 1 with files %v", s, tt.wantFiles)
			}
			got, err := c.Get(context.Background(), "s")
			if err != nil || !reflect.DeepEqual(got, s) {
				t.Errorf("Get = %+v, %v; want %+v", got, err, s)
			}
			// Sandboxes may run as another user: everything must be
			// readable by all.
			filepath.WalkDir(filepath.Join(c.Dir(), "s"), func(p string, d fs.DirEntry, err error) error {
				fi, _ := d.Info()
				if fi.Mode().Perm()&0o444 != 0o444 || d.IsDir() && fi.Mode().Perm() != 0o755 {
					t.Errorf("%s has mode %v", p, fi.Mode())
				}
				return nil
			})
		})
	}
}

func TestInstallRefusesArchives(t *testing.T) {
	md := skillMD("s", "")
	tests := []struct {
		name    string
		files   []zfile
		raw     []byte // instead of files
		wantErr error
		wantMsg string
	}{
		{name: "dot-dot entry", files: []zfile{{name: "SKILL.md", body: md}, {name: "../evil", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: `entry "../evil" climbs out`},
		{name: "dot-dot inside a path", files: []zfile{{name: "SKILL.md", body: md}, {name: "a/../../evil", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "climbs out"},
		{name: "dot-dot that stays inside", files: []zfile{{name: "SKILL.md", body: md}, {name: "a/../b", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "climbs out"},
		{name: "absolute entry", files: []zfile{{name: "SKILL.md", body: md}, {name: "/tmp/evil", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "is an absolute path"},
		{name: "drive letter", files: []zfile{{name: "SKILL.md", body: md}, {name: "C:/evil", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "is an absolute path"},
		{name: "backslash drive letter", files: []zfile{{name: "SKILL.md", body: md}, {name: `c:\evil`, body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "is an absolute path"},
		{name: "backslash traversal", files: []zfile{{name: "SKILL.md", body: md}, {name: `..\..\evil`, body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "climbs out"},
		{name: "backslash traversal in a folder", files: []zfile{{name: `s\SKILL.md`, body: md}, {name: `s\..\..\evil`, body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "climbs out"},
		{name: "symlink to /etc", files: []zfile{{name: "SKILL.md", body: md}, {name: "etc", body: "/etc", mode: fs.ModeSymlink | 0o777}}, wantErr: skills.ErrInvalid, wantMsg: `entry "etc" is a symlink`},
		{name: "symlink inside", files: []zfile{{name: "SKILL.md", body: md}, {name: "link", body: "SKILL.md", mode: fs.ModeSymlink | 0o777}}, wantErr: skills.ErrInvalid, wantMsg: "is a symlink"},
		{name: "symlink then a file through it", files: []zfile{{name: "SKILL.md", body: md}, {name: "d", body: "/tmp", mode: fs.ModeSymlink | 0o777}, {name: "d/evil", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "is a symlink"},
		{name: "named pipe", files: []zfile{{name: "SKILL.md", body: md}, {name: "p", mode: fs.ModeNamedPipe | 0o644}}, wantErr: skills.ErrInvalid, wantMsg: "named pipe"},
		{name: "NUL in a name", files: []zfile{{name: "SKILL.md", body: md}, {name: "a\x00b", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "NUL"},
		{name: "empty component", files: []zfile{{name: "SKILL.md", body: md}, {name: "a//b", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "empty"},
		{name: "duplicate entry", files: []zfile{{name: "SKILL.md", body: md}, {name: "SKILL.md", body: md}}, wantErr: skills.ErrInvalid, wantMsg: "appears twice"},
		{name: "file where a folder goes", files: []zfile{{name: "SKILL.md", body: md}, {name: "scripts", body: "x"}, {name: "scripts/run.py", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: `entry "scripts/run.py"`},
		{name: "no SKILL.md", files: []zfile{{name: "README.md", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "no SKILL.md at the archive's root or inside one top-level folder"},
		{name: "SKILL.md too deep", files: []zfile{{name: "a/b/SKILL.md", body: md}}, wantErr: skills.ErrInvalid, wantMsg: "no SKILL.md"},
		{name: "two top-level folders", files: []zfile{{name: "s/SKILL.md", body: md}, {name: "t/x", body: "x"}}, wantErr: skills.ErrInvalid, wantMsg: "no SKILL.md"},
		{name: "folder named otherwise", files: []zfile{{name: "my-skill/SKILL.md", body: md}}, wantErr: skills.ErrInvalid, wantMsg: `is "s" but the skill's directory is "my-skill"`},
		{name: "invalid front matter", files: []zfile{{name: "SKILL.md", body: "---\nname: s\n---\n"}}, wantErr: skills.ErrInvalid, wantMsg: `skill "(archive)": description: is required`},
		{name: "traversal as name", files: []zfile{{name: "SKILL.md", body: "---\nname: ../../x\ndescription: d\n---\n"}}, wantErr: skills.ErrInvalid, wantMsg: "only lowercase"},
		{name: "SKILL.md too large", files: []zfile{{name: "SKILL.md", body: md + strings.Repeat("x", 300<<10)}}, wantErr: skills.ErrTooLarge, wantMsg: "SKILL.md: too large: it is over the limit of 262144 bytes"},
		{name: "not a zip", raw: []byte("PK but not really a zip archive"), wantErr: skills.ErrInvalid, wantMsg: "not a readable ZIP archive"},
		{name: "unknown compression", raw: rawEntryZip(t, 99, 10, []byte("0123456789")), wantErr: skills.ErrInvalid, wantMsg: "compression method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "r")
			c := newCatalog(t, skills.Config{Root: root})
			data := tt.raw
			if data == nil {
				data = zipOf(t, tt.files...)
			}
			s, err := install(c, data, "admin")
			if !errors.Is(err, tt.wantErr) || !strings.Contains(fmtErr(err), tt.wantMsg) {
				t.Fatalf("Install = %+v, %v; want %v saying %q", s, err, tt.wantErr, tt.wantMsg)
			}
			assertNothingInstalled(t, c, root)
		})
	}
}

// assertNothingInstalled checks that a refused install left no skill, no
// staging tree and nothing next to the root.
func assertNothingInstalled(t *testing.T, c *skills.Catalog, root string) {
	t.Helper()
	if names := dirNames(t, c.Dir()); len(names) != 0 {
		t.Errorf("R/skills holds %v after a refused install", names)
	}
	if names := dirNames(t, filepath.Join(root, ".staging")); len(names) != 0 {
		t.Errorf("R/.staging holds %v after a refused install", names)
	}
	if names := dirNames(t, filepath.Dir(root)); !reflect.DeepEqual(names, []string{"r"}) {
		t.Errorf("the root's parent holds %v, want only r", names)
	}
}

// rawEntryZip is an archive with SKILL.md and one entry assets/blob whose
// compressed data, method and declared size are given as they are.
func rawEntryZip(t *testing.T, method uint16, declared uint64, compressed []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, skillMD("s", ""))
	w, err = zw.CreateRaw(&zip.FileHeader{Name: "assets/blob", Method: method,
		CompressedSize64: uint64(len(compressed)), UncompressedSize64: declared})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(compressed)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// deflatedZeros is a deflate stream of mib MiB of zeros, made by repeating
// one flushed block instead of compressing it all: about 1 KiB per MiB.
func deflatedZeros(t *testing.T, mib int) []byte {
	t.Helper()
	var block bytes.Buffer
	fw, _ := flate.NewWriter(&block, flate.BestCompression)
	fw.Write(make([]byte, 1<<20))
	fw.Flush()
	var end bytes.Buffer
	fw2, _ := flate.NewWriter(&end, flate.BestCompression)
	fw2.Close()
	return append(bytes.Repeat(block.Bytes(), mib), end.Bytes()...)
}

// countingReaderAt counts the archive bytes Install reads.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func TestInstallStopsZipBombs(t *testing.T) {
	// The stream the bombs carry really is that many zeros.
	if n, err := io.Copy(io.Discard, flate.NewReader(bytes.NewReader(deflatedZeros(t, 8)))); err != nil || n != 8<<20 {
		t.Fatalf("deflatedZeros(8) inflates to %d bytes (%v), want %d", n, err, 8<<20)
	}
	gib := deflatedZeros(t, 1024)
	tests := []struct {
		name     string
		cfg      skills.Config
		data     []byte
		wantErr  error
		wantMsg  string
		maxRead  int64 // archive bytes Install may read
		archived int64
	}{
		{name: "1 GiB of zeros, honest header", data: rawEntryZip(t, zip.Deflate, 1<<30, gib),
			wantErr: skills.ErrTooLarge, wantMsg: `entry "assets/blob" unpacks to 1073741824 bytes, over the per-file limit of 33554432`, maxRead: 64 << 10},
		{name: "1 GiB of zeros, header says 100 bytes", data: rawEntryZip(t, zip.Deflate, 100, gib),
			wantErr: skills.ErrInvalid, wantMsg: `entry "assets/blob" is corrupt`, maxRead: 256 << 10},
		{name: "1 GiB of zeros, header says just under the limit", cfg: skills.Config{MaxEntryBytes: 1 << 20, MaxUnpackedBytes: 1 << 20},
			data: rawEntryZip(t, zip.Deflate, 1<<20-1000, gib), wantErr: skills.ErrInvalid, wantMsg: "does not match its header", maxRead: 256 << 10},
		{name: "stored entries over the total", cfg: skills.Config{MaxUnpackedBytes: 1 << 20},
			data:    zipOf(t, zfile{name: "SKILL.md", body: skillMD("s", "")}, zfile{name: "a", body: strings.Repeat("a", 600<<10)}, zfile{name: "b", body: strings.Repeat("b", 600<<10)}),
			wantErr: skills.ErrTooLarge, wantMsg: "the archive unpacks to more than 1048576 bytes"},
		{name: "archive too large", cfg: skills.Config{MaxZipBytes: 100},
			data: zipOf(t, zfile{name: "SKILL.md", body: skillMD("s", "")}), wantErr: skills.ErrTooLarge, wantMsg: "over the limit of 100", maxRead: 1},
		{name: "too many entries", cfg: skills.Config{MaxEntries: 10},
			data: zipOf(t, append([]zfile{{name: "SKILL.md", body: skillMD("s", "")}}, manyFiles(10)...)...), wantErr: skills.ErrTooLarge, wantMsg: "has 11 entries, over the limit of 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "r")
			tt.cfg.Root = root
			c := newCatalog(t, tt.cfg)
			r := &countingReaderAt{r: bytes.NewReader(tt.data)}
			s, err := c.Install(context.Background(), r, int64(len(tt.data)), "admin")
			if !errors.Is(err, tt.wantErr) || !strings.Contains(fmtErr(err), tt.wantMsg) {
				t.Fatalf("Install = %+v, %v; want %v saying %q", s, err, tt.wantErr, tt.wantMsg)
			}
			if tt.maxRead > 0 && r.n.Load() > tt.maxRead {
				t.Errorf("Install read %d of the archive's %d bytes, want at most %d: it inflated the bomb", r.n.Load(), len(tt.data), tt.maxRead)
			}
			assertNothingInstalled(t, c, root)
		})
	}
}

func manyFiles(n int) []zfile {
	var fs []zfile
	for i := range n {
		fs = append(fs, zfile{name: "assets/f" + string(rune('a'+i)), body: "x"})
	}
	return fs
}

func TestInstallHonoursContext(t *testing.T) {
	c := newCatalog(t, skills.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := zipOf(t, zfile{name: "SKILL.md", body: skillMD("s", "")})
	if _, err := c.Install(ctx, bytes.NewReader(data), int64(len(data)), "admin"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Install with a cancelled context: %v, want context.Canceled", err)
	}
	if names := dirNames(t, c.Dir()); len(names) != 0 {
		t.Errorf("R/skills holds %v", names)
	}
}

func TestZipDirRefusesSymlinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	writeTree(t, dir, map[string]string{"SKILL.md": skillMD("s", "")})
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	if _, err := skills.ZipDir(dir); err == nil || !strings.Contains(err.Error(), "passwd is a symlink") {
		t.Fatalf("ZipDir = %v, want a refusal of the symlink", err)
	}
}
