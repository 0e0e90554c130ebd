package mcptool

import (
	"regexp"
	"strings"
	"testing"
)

var modelName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolNames(t *testing.T) {
	long := strings.Repeat("x", 40)
	tests := []struct {
		name   string
		server string
		tools  []string
		want   []string // "" for a hashed name, checked by shape
	}{
		{"plain", "web", []string{"echo", "add_two", "Get-Thing"}, []string{"web__echo", "web__add_two", "web__Get-Thing"}},
		{"dots", "web", []string{"files.read"}, []string{""}},
		{"too long", strings.Repeat("s", 32), []string{long}, []string{""}},
		{"sanitized twins", "web", []string{"a.b", "a b", "a_b"}, []string{"", "", "web__a_b"}},
		{"listed twice", "web", []string{"echo", "echo"}, []string{"web__echo", ""}},
		{"unicode", "web", []string{"查询"}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toolNames(tt.server, tt.tools)
			seen := map[string]bool{}
			for i, name := range got {
				if !modelName.MatchString(name) {
					t.Errorf("name %q of %q is not a valid model tool name", name, tt.tools[i])
				}
				if seen[name] {
					t.Errorf("name %q given twice: %q", name, got)
				}
				seen[name] = true
				if id, ok := serverOf(name); !ok || id != tt.server {
					t.Errorf("serverOf(%q) = %q, %v; want %q", name, id, ok, tt.server)
				}
				if w := tt.want[i]; w != "" && name != w {
					t.Errorf("name of %q: got %q, want %q", tt.tools[i], name, w)
				}
				if tt.want[i] == "" && !regexp.MustCompile(`_[0-9a-f]{8}(_\d+)?$`).MatchString(name) {
					t.Errorf("name of %q: got %q, want one ending with a hash", tt.tools[i], name)
				}
			}
			// The same listing gives the same names: the model's calls
			// across turns and engine restarts still resolve.
			again := toolNames(tt.server, tt.tools)
			for i := range got {
				if again[i] != got[i] {
					t.Errorf("names are not stable: %q then %q", got, again)
				}
			}
		})
	}
}

func TestToolNamesKeepTheStartOfLongNames(t *testing.T) {
	name := toolNames("srv", []string{"search_" + strings.Repeat("y", 80)})[0]
	if len(name) != MaxNameLen || !strings.HasPrefix(name, "srv__search_yyy") {
		t.Errorf("got %q (%d characters); want the start of the name cut to %d", name, len(name), MaxNameLen)
	}
}
