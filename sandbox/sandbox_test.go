package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestIDFor(t *testing.T) {
	got := IDFor("app1", "user1", "chat1")
	// printf 'app1-user1-chat1' | sha256sum | cut -c1-16
	if want := "c444c8869abb489e"; got != want {
		t.Fatalf("IDFor = %q, want %q", got, want)
	}
	if len(got) != 16 || !ValidID(got) {
		t.Fatalf("IDFor = %q, want 16 lowercase hex characters", got)
	}
	if IDFor("app1", "user1", "chat1") != got {
		t.Fatal("IDFor is not deterministic")
	}
	if IDFor("app1", "user1", "chat2") == got || IDFor("app1", "user2", "chat1") == got {
		t.Fatal("different chats share a sandbox id")
	}
}

// TestIDsCannotCollide: chats that S1's "appId-userId-chatId" spells
// alike get different sandboxes; S1's ID stays for chats it cannot
// confuse; a legacy sandbox keeps its ID for the chat its record names,
// and the other chat never gets that ID.
func TestIDsCannotCollide(t *testing.T) {
	pairs := [][2][3]string{
		{{"app", "a", "b-c"}, {"app", "a-b", "c"}},
		{{"app", "u:dan", "x-c"}, {"app", "u:dan-x", "c"}},
		{{"a-b", "u", "c"}, {"a", "b-u", "c"}},
	}
	for _, p := range pairs {
		x, y := IDFor(p[0][0], p[0][1], p[0][2]), IDFor(p[1][0], p[1][1], p[1][2])
		if x == y {
			t.Errorf("%q and %q share sandbox %s", p[0], p[1], x)
		}
		if !ValidID(x) || !ValidID(y) {
			t.Errorf("IDs %q, %q are not valid", x, y)
		}
	}
	if got, want := IDFor("app1", "u:dan", "chat-1"), LegacyID("app1", "u:dan", "chat-1"); got != want {
		t.Errorf("an unambiguous chat's ID changed: %s, want S1's %s", got, want)
	}
	// A legacy record of "u:leg-x"/"c" keeps its ID; "u:leg"/"x-c" (the
	// same S1 string) gets another.
	owner := Scope{AppID: "legacyapp", UserID: "u:leg-x", ChatID: "c"}
	old := LegacyID(owner.AppID, owner.UserID, owner.ChatID)
	if !LegacyOwner(owner, old) {
		t.Fatal("LegacyOwner does not recognise the record")
	}
	KeepLegacyIDs([]Scope{owner})
	if got := owner.SandboxID(); got != old {
		t.Errorf("the legacy chat's ID is %s, want its old %s", got, old)
	}
	if got := IDFor("legacyapp", "u:leg", "x-c"); got == old {
		t.Errorf("the other chat spelling the same S1 string got the legacy sandbox %s", got)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"0123456789abcdef": true, "0123456789ABCDEF": false, "../../etc/passwd": false,
		"0123456789abcde": false, "0123456789abcdeg": false, "": false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestClampTimeout(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{0, DefaultTimeout}, {-5 * time.Second, DefaultTimeout}, {time.Millisecond, time.Second},
		{10 * time.Second, 10 * time.Second}, {301 * time.Second, 300 * time.Second}, {time.Hour, 300 * time.Second},
	}
	for _, tc := range tests {
		if got := ClampTimeout(tc.in); got != tc.want {
			t.Errorf("ClampTimeout(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestWorkspaceRel(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{"", ".", false}, {"/workspace", ".", false}, {"/workspace/", ".", false},
		{"a/b.txt", "a/b.txt", false}, {"/workspace/a/./b", "a/b", false}, {"./x", "x", false},
		{"../etc/passwd", "", true}, {"../../etc/passwd", "", true}, {"a/../../b", "", true},
		{"/workspace/../etc", "", true}, {"/etc/passwd", "", true}, {"/workspacex/a", "", true},
		{"a\x00b", "", true}, {"/", "", true},
	}
	for _, tc := range tests {
		got, err := WorkspaceRel(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrInvalidPath) {
				t.Errorf("WorkspaceRel(%q) = %q, %v; want ErrInvalidPath", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("WorkspaceRel(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCollectorCaps(t *testing.T) {
	c := NewCollector(100, nil)
	w := c.Stdout()
	w.Write([]byte("HEAD"))
	for i := 0; i < 1000; i++ {
		w.Write([]byte("0123456789"))
	}
	w.Write([]byte("TAIL"))
	r := c.Result(0, false, time.Second, time.Millisecond)
	if !r.Truncated {
		t.Fatal("not marked truncated")
	}
	if !strings.HasPrefix(r.Stdout, "HEAD") || !strings.HasSuffix(r.Stdout, "TAIL") {
		t.Fatalf("head or tail lost: %q", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "[9908 bytes truncated]") {
		t.Fatalf("marker missing or wrong count: %q", r.Stdout)
	}
	small := NewCollector(100, nil)
	small.Stdout().Write([]byte("short"))
	if r := small.Result(0, false, time.Second, 0); r.Truncated || r.Stdout != "short" {
		t.Fatalf("short output changed: %+v", r)
	}
}

func TestCollectorKeepsRunesWhole(t *testing.T) {
	c := NewCollector(10, nil)
	c.Stderr().Write([]byte(strings.Repeat("é", 100))) // 2 bytes each
	r := c.Result(0, false, time.Second, 0)
	if !utf8.ValidString(r.Stderr) || strings.ContainsRune(r.Stderr, utf8.RuneError) {
		t.Fatalf("a cut rune was left broken: %q", r.Stderr)
	}
}

func TestCollectorTimeoutNote(t *testing.T) {
	c := NewCollector(0, nil)
	c.Stderr().Write([]byte("partial"))
	r := c.Result(-1, true, 5*time.Second, 5*time.Second)
	if r.ExitCode != 124 || !r.TimedOut || !strings.HasPrefix(r.Stderr, "partial\n") || !strings.Contains(r.Stderr, "timed out after 5s") {
		t.Fatalf("timeout result = %+v", r)
	}
}

func TestCollectorLiveOutputOrder(t *testing.T) {
	var got []string
	c := NewCollector(0, func(s Stream, p []byte) { got = append(got, string(p)) })
	c.Stdout().Write([]byte("a"))
	c.Stderr().Write([]byte("b"))
	c.Stdout().Write([]byte("c"))
	if strings.Join(got, "") != "abc" {
		t.Fatalf("live output = %q, want abc", got)
	}
}
