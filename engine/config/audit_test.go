package config

import (
	"strings"
	"testing"
	"time"
)

// TestAuditRetention: FLOWBOX_AUDIT_RETENTION takes days or a duration;
// 0 keeps everything; anything else is refused, naming the variable.
func TestAuditRetention(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
		err   bool
	}{
		{"", 90 * 24 * time.Hour, false},
		{"30", 30 * 24 * time.Hour, false},
		{"7d", 7 * 24 * time.Hour, false},
		{"36h", 36 * time.Hour, false},
		{"0", 0, false},
		{"-1", 0, true},
		{"a week", 0, true},
	}
	for _, tc := range tests {
		c, err := Parse(env(map[string]string{"FLOWBOX_AUDIT_RETENTION": tc.value}))
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "FLOWBOX_AUDIT_RETENTION") {
				t.Errorf("%q: error %v, want one naming FLOWBOX_AUDIT_RETENTION", tc.value, err)
			}
			continue
		}
		if err != nil || c.Workers.AuditRetention != tc.want {
			t.Errorf("%q: %v (%v), want %v", tc.value, c.Workers.AuditRetention, err, tc.want)
		}
	}
}
