package mongodb

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestQuiet: what passes keeps the attributes and groups the logger was
// given, in order; what is below warn, or a dump of a failed reply, is
// dropped.
func TestQuiet(t *testing.T) {
	var buf bytes.Buffer
	inner := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})
	log := slog.New(quiet{h: inner}).With("component", "ferretdb")
	conn := log.With("conn", 7).WithGroup("cmd").With("name", "find")

	conn.Info("connection accepted")
	conn.Debug("details")
	conn.Warn("Response message: a failed reply")
	conn.Warn("disk almost full", "free", "1%")
	conn.Error("Response header: kept at error")

	want := []string{
		`level=WARN msg="disk almost full" component=ferretdb conn=7 cmd.name=find cmd.free=1%`,
		`level=ERROR msg="Response header: kept at error" component=ferretdb conn=7 cmd.name=find`,
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	// Loggers derived from one another do not share attributes.
	buf.Reset()
	log.With("conn", 8).Warn("other")
	if line := strings.TrimSpace(buf.String()); line != `level=WARN msg=other component=ferretdb conn=8` {
		t.Errorf("sibling logger: %s", line)
	}
}
