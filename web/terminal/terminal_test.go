package terminal

import (
	"slices"
	"testing"
)

// TestWithoutQueries: a page that comes back draws the screen without the
// shell's queries of the terminal, which it would answer as typed keys.
func TestWithoutQueries(t *testing.T) {
	for _, c := range []struct{ screen, want string }{
		{"", ""},
		{"/tmp # \x1b[6n", "/tmp # "},
		{"a\x1b[6nb\x1b[5n\x1b[c\x1b[>0cc", "abc"},
		{"\x1b[1;32mgreen\x1b[0m \x1b[3A\r\x1b[J", "\x1b[1;32mgreen\x1b[0m \x1b[3A\r\x1b[J"},
		{"cut \x1b[", "cut \x1b["},
		{"\x1b[60n", "\x1b[60n"},
	} {
		if got := string(withoutQueries([]byte(c.screen))); got != c.want {
			t.Errorf("withoutQueries(%q) = %q, want %q", c.screen, got, c.want)
		}
	}
}

// TestTrimSizes: the sizes of a screen whose start is dropped.
func TestTrimSizes(t *testing.T) {
	sizes := func() []size { return []size{{0, 80, 24}, {10, 2, 24}, {20, 80, 30}} }
	for _, c := range []struct {
		n    int
		want []size
	}{
		{0, sizes()},
		{5, []size{{0, 80, 24}, {5, 2, 24}, {15, 80, 30}}},
		{10, []size{{0, 2, 24}, {10, 80, 30}}},
		{15, []size{{0, 2, 24}, {5, 80, 30}}},
		{25, []size{{0, 80, 30}}},
	} {
		if got := trimSizes(sizes(), c.n); !slices.Equal(got, c.want) {
			t.Errorf("trimSizes(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}
