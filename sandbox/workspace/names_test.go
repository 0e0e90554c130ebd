package workspace

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flowbox/flowbox/sandbox"
)

func TestCleanName(t *testing.T) {
	long := strings.Repeat("a", 300) + ".csv"
	longCJK := strings.Repeat("报", 100) + ".csv" // 304 bytes
	longNoExt := strings.Repeat("é", 200)        // 400 bytes
	longExt := "a." + strings.Repeat("x", 300)
	tests := []struct {
		name    string
		in      string
		want    string // when check is nil and wantErr false
		wantErr bool
		check   func(t *testing.T, got string)
	}{
		{name: "plain", in: "data.csv", want: "data.csv"},
		{name: "unicode letters kept", in: "报告 2026.csv", want: "报告 2026.csv"},
		{name: "dotfile kept", in: ".env", want: ".env"},
		{name: "dotdot slash", in: "../x", wantErr: true},
		{name: "absolute", in: "/etc/passwd", wantErr: true},
		{name: "separator", in: "a/b", wantErr: true},
		{name: "backslash", in: `a\b`, wantErr: true},
		{name: "windows path", in: `C:\fakepath\x.csv`, wantErr: true},
		{name: "NUL", in: "a\x00b.txt", wantErr: true},
		{name: "dot", in: ".", wantErr: true},
		{name: "dotdot", in: "..", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "only blanks", in: "   ", wantErr: true},
		{name: "only dots", in: "...", wantErr: true},
		{name: "newline", in: "a\nb.txt", want: "a_b.txt"},
		{name: "escape sequence", in: "\x1b[31mred.txt", want: "_[31mred.txt"},
		{name: "DEL and C1", in: "a\x7fb\u0085c", want: "a_b_c"},
		{name: "bidi override", in: "evil\u202egpj.exe", want: "evil_gpj.exe"},
		{name: "invalid UTF-8", in: "a\xffb.txt", want: "a_b.txt"},
		{name: "NFD to NFC", in: "e\u0301.txt", want: "\u00e9.txt"},
		{name: "blanks and trailing dots", in: "  report.csv. . ", want: "report.csv"},
		{name: "300 bytes keeps extension", in: long, check: func(t *testing.T, got string) {
			if len(got) != maxNameBytes || !strings.HasSuffix(got, ".csv") || !strings.HasPrefix(long, got[:len(got)-4]) {
				t.Errorf("got %d bytes %q, want 255 bytes ending in .csv", len(got), got)
			}
		}},
		{name: "300 bytes multibyte", in: longCJK, check: func(t *testing.T, got string) {
			if len(got) > maxNameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, ".csv") || !strings.HasPrefix(longCJK, strings.TrimSuffix(got, ".csv")) {
				t.Errorf("got %d bytes %q, want at most 255 valid bytes, a prefix of the name, ending in .csv", len(got), got)
			}
			if len(got) != 253 { // 83 three-byte runes + ".csv"
				t.Errorf("got %d bytes, want 253", len(got))
			}
		}},
		{name: "long without extension", in: longNoExt, check: func(t *testing.T, got string) {
			if len(got) > maxNameBytes || len(got) < maxNameBytes-1 || !utf8.ValidString(got) {
				t.Errorf("got %d bytes %q, want 254-255 valid bytes", len(got), got)
			}
		}},
		{name: "long extension is not kept", in: longExt, check: func(t *testing.T, got string) {
			if got != longExt[:maxNameBytes] {
				t.Errorf("got %q, want the first 255 bytes", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CleanName(tt.in)
			if tt.wantErr {
				if !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Fatalf("CleanName(%q) = %q, %v; want ErrInvalidPath", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CleanName(%q): %v", tt.in, err)
			}
			if tt.check != nil {
				tt.check(t, got)
				return
			}
			if got != tt.want {
				t.Errorf("CleanName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCandidate(t *testing.T) {
	long := strings.Repeat("报", 100) + ".csv"
	tests := []struct {
		name string
		n    int
		want string
	}{
		{"data.csv", 0, "data.csv"},
		{"data.csv", 1, "data (1).csv"},
		{"data.csv", 12, "data (12).csv"},
		{"archive.tar.gz", 1, "archive.tar (1).gz"},
		{"README", 2, "README (2)"},
		{".env", 1, ".env (1)"},
	}
	for _, tt := range tests {
		if got := candidate(tt.name, tt.n); got != tt.want {
			t.Errorf("candidate(%q, %d) = %q, want %q", tt.name, tt.n, got, tt.want)
		}
	}
	clean, err := CleanName(long)
	if err != nil {
		t.Fatal(err)
	}
	got := candidate(clean, 7)
	if len(got) > maxNameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, " (7).csv") {
		t.Errorf("candidate(long, 7) = %d bytes %q, want at most 255 valid bytes ending in \" (7).csv\"", len(got), got)
	}
}

func TestRelPath(t *testing.T) {
	tests := []struct {
		area    Area
		in      string
		want    string
		wantErr bool
	}{
		{Uploads, "", ".", false},
		{Uploads, ".", ".", false},
		{Uploads, "a/b", "a/b", false},
		{Uploads, "a//b/./", "a/b", false},
		{Uploads, "/workspace/uploads", ".", false},
		{Uploads, "/workspace/uploads/a/b.csv", "a/b.csv", false},
		{Intermediate, "/workspace/intermediate/out", "out", false},
		{Uploads, "/workspace/intermediate/out", "", true},
		{Uploads, "/workspace/uploadsX/a", "", true},
		{Uploads, "/etc", "", true},
		{Uploads, "../x", "", true},
		{Uploads, "a/../b", "", true},
		{Uploads, "/workspace/uploads/../intermediate", "", true},
		{Uploads, "a\x00b", "", true},
	}
	for _, tt := range tests {
		got, err := relPath(tt.area, tt.in)
		if tt.wantErr {
			if !errors.Is(err, sandbox.ErrInvalidPath) {
				t.Errorf("relPath(%s, %q) = %q, %v; want ErrInvalidPath", tt.area, tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("relPath(%s, %q) = %q, %v; want %q", tt.area, tt.in, got, err, tt.want)
		}
	}
}

func TestHumanSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{100 << 20, "100 MiB"},
		{120 << 20, "120 MiB"},
		{1 << 30, "1 GiB"},
		{5 << 40, "5 TiB"},
	}
	for _, tt := range tests {
		if got := HumanSize(tt.n); got != tt.want {
			t.Errorf("HumanSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
