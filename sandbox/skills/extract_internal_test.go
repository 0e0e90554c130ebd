package skills

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExtractCountsWrittenBytes checks the last line of defence against
// ZIP bombs on its own: plan, which refuses archives by their declared
// sizes, is skipped, and the limits must still hold by counting what is
// written.
func TestExtractCountsWrittenBytes(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"a", "b", "c"} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(make([]byte, 3<<20))
	}
	zw.Close()
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var entries []zipEntry
	for _, f := range zr.File {
		entries = append(entries, zipEntry{f: f, rel: f.Name})
	}
	tests := []struct {
		name      string
		cfg       Config
		wantMsg   string
		wantBytes int64 // at most on disk
	}{
		{name: "per file", cfg: Config{MaxEntryBytes: 1 << 20, MaxUnpackedBytes: 100 << 20},
			wantMsg: `entry "a" unpacks to more than the per-file limit of 1048576 bytes`, wantBytes: 1<<20 + 1},
		{name: "in all", cfg: Config{MaxEntryBytes: 100 << 20, MaxUnpackedBytes: 5 << 20},
			wantMsg: "the archive unpacks to more than 5242880 bytes", wantBytes: 5<<20 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Root = t.TempDir()
			c, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			err = c.extract(context.Background(), dir, entries)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("extract = %v, want ErrTooLarge saying %q", err, tt.wantMsg)
			}
			if n := treeSize(dir); n > tt.wantBytes {
				t.Errorf("%d bytes were written, want at most %d", n, tt.wantBytes)
			}
			if _, err := os.Stat(filepath.Join(dir, "c")); err == nil {
				t.Errorf("extraction went on after the limit")
			}
		})
	}
}
