package sandbox

import "testing"

// BenchmarkIDFor compares the ID of a chat under S1's formula alone
// (legacy) with IDFor for an unambiguous chat (S1 after a table lookup)
// and an ambiguous one (the length-prefixed hash).
func BenchmarkIDFor(b *testing.B) {
	for _, bc := range []struct {
		name string
		f    func() string
	}{
		{"legacy", func() string { return LegacyID("0123456789abcdef01234567", "u:alice", "chat-0123456789") }},
		{"unambiguous", func() string { return IDFor("0123456789abcdef01234567", "u:alice", "chat-0123456789") }},
		{"ambiguous", func() string { return IDFor("0123456789abcdef01234567", "u:alice-x", "chat-0123456789") }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = bc.f()
			}
		})
	}
}
