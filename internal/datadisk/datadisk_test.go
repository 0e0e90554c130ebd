package datadisk

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in      string
		want    Limit
		wantErr string
	}{
		{"2GiB", Limit{Bytes: 2 << 30}, ""},
		{"512MiB", Limit{Bytes: 512 << 20}, ""},
		{"5%", Limit{Percent: 5}, ""},
		{"0", Limit{}, ""},
		{"2GB", Limit{}, "use a size such as 2GiB"},
		{"150%", Limit{}, "between 0 and 100"},
		{"-1MiB", Limit{}, "use a size such as 2GiB"},
		{"", Limit{}, "use a size such as 2GiB"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLimit(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ParseLimit(%q) = %+v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestGuard: the guard reports the filesystem of a watched path whose
// free space is under the minimum, in bytes or as a share, and nothing
// when it is off or the path is not made yet.
func TestGuard(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	tests := []struct {
		name string
		g    *Guard
		low  bool
	}{
		{"off", &Guard{Paths: []string{dir}}, false},
		{"nil", nil, false},
		{"room", &Guard{Paths: []string{dir}, Min: Limit{Bytes: 1 << 20}}, false},
		{"low in bytes", &Guard{Paths: []string{dir}, Min: Limit{Bytes: free + 1<<30}}, true},
		{"low as a share", &Guard{Paths: []string{dir}, Min: Limit{Percent: 99.999}}, true},
		{"missing path", &Guard{Paths: []string{dir + "/not-yet"}, Min: Limit{Bytes: free + 1<<30}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.Check()
			var low *LowError
			if got := errors.As(err, &low); got != tc.low || (tc.low && (!errors.Is(err, ErrLow) || low.Path != dir)) {
				t.Errorf("Check() = %v; want low %v for %s", err, tc.low, dir)
			}
		})
	}
}
