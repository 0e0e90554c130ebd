package mcptool

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// MaxNameLen is the longest tool name model APIs accept
// (^[a-zA-Z0-9_-]{1,64}$).
const MaxNameLen = 64

// Separator joins a server's id and its tool's name in the name the
// model sees. Server ids never contain it, so the server is the part
// before its first occurrence.
const Separator = "__"

// hashLen is how many hex digits of a tool's sha256 a rewritten name
// ends with.
const hashLen = 8

// toolNames gives each of a server's tools the name the model sees:
// "{serverID}__{tool}" when that is a valid name, else the tool's name
// with its other characters turned into "_", cut to fit, and ended with
// a short hash of the original, so that two tools never get one name.
// names[i] is the name of tools[i].
func toolNames(serverID string, tools []string) []string {
	prefix := serverID + Separator
	names := make([]string, len(tools))
	taken := make(map[string]bool, len(tools))
	for i, t := range tools {
		// A server listing one name twice gets the second a hashed name.
		if name := prefix + t; len(name) <= MaxNameLen && validName(name) && !taken[name] {
			names[i] = name
			taken[name] = true
		}
	}
	for i, t := range tools {
		if names[i] != "" {
			continue
		}
		name := hashedName(prefix, t, "")
		// A hash that meets another tool's name: extremely unlikely, but
		// the names must stay unique, so count on.
		for n := 2; taken[name]; n++ {
			name = hashedName(prefix, t, "_"+strconv.Itoa(n))
		}
		names[i] = name
		taken[name] = true
	}
	return names
}

// hashedName is prefix + the sanitized tool name, cut so that "_" + hash
// + suffix fits in MaxNameLen.
func hashedName(prefix, tool, suffix string) string {
	sum := sha256.Sum256([]byte(tool))
	tail := "_" + hex.EncodeToString(sum[:])[:hashLen] + suffix
	body := sanitize(tool)
	if room := MaxNameLen - len(prefix) - len(tail); len(body) > room {
		body = body[:max(room, 0)]
	}
	return prefix + body + tail
}

// sanitize turns every character a tool name may not have into "_".
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if nameChar(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func nameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// validName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$.
func validName(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for _, r := range name {
		if !nameChar(r) {
			return false
		}
	}
	return true
}

// serverOf is the server id a model's tool name starts with.
func serverOf(name string) (string, bool) {
	id, _, ok := strings.Cut(name, Separator)
	return id, ok && id != ""
}
