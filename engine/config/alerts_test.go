package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox/audit"
)

// TestAlertConfig: the FLOWBOX_ALERT_* defaults, good values, and the
// errors of bad ones, each naming its variable and never the URL.
func TestAlertConfig(t *testing.T) {
	c, err := Parse(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Alerts
	if a.WebhookURL != "" || !slices.Equal(a.Events, []audit.AlertEvent{audit.AlertRefused, audit.AlertLimited, audit.AlertOOM, audit.AlertFailureRate}) ||
		a.FailureCount != 10 || a.FailureWindow != 5*time.Minute || a.RetryDelay != 0 {
		t.Fatalf("defaults = %+v", a)
	}

	c, err = Parse(env(map[string]string{"FLOWBOX_ALERT_WEBHOOK_URL": "https://hooks.example.com/flowbox?token=t0ken",
		"FLOWBOX_ALERT_WEBHOOK_SECRET": "s3cret", "FLOWBOX_ALERT_EVENTS": " egress_refused, unavailable,egress_refused ",
		"FLOWBOX_ALERT_FAILURE_RATE": "3/1h", "FLOWBOX_ALERT_RETRY_DELAY": "200ms"}))
	if err != nil {
		t.Fatal(err)
	}
	a = c.Alerts
	if a.WebhookSecret != "s3cret" || !slices.Equal(a.Events, []audit.AlertEvent{audit.AlertEgressRefused, audit.AlertUnavailable}) ||
		a.FailureCount != 3 || a.FailureWindow != time.Hour || a.RetryDelay != 200*time.Millisecond {
		t.Fatalf("set = %+v", a)
	}

	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"FLOWBOX_ALERT_WEBHOOK_URL": "https://hooks.example.com/x"}, "FLOWBOX_ALERT_WEBHOOK_SECRET is required"},
		{map[string]string{"FLOWBOX_ALERT_WEBHOOK_URL": "hooks.example.com/t0ken", "FLOWBOX_ALERT_WEBHOOK_SECRET": "s"}, "FLOWBOX_ALERT_WEBHOOK_URL is not an absolute"},
		{map[string]string{"FLOWBOX_ALERT_WEBHOOK_URL": "ftp://hooks.example.com/t0ken", "FLOWBOX_ALERT_WEBHOOK_SECRET": "s"}, "FLOWBOX_ALERT_WEBHOOK_URL is not an absolute"},
		{map[string]string{"FLOWBOX_ALERT_WEBHOOK_URL": "https:///t0ken", "FLOWBOX_ALERT_WEBHOOK_SECRET": "s"}, "FLOWBOX_ALERT_WEBHOOK_URL is not an absolute"},
		{map[string]string{"FLOWBOX_ALERT_EVENTS": "refused,swap"}, `FLOWBOX_ALERT_EVENTS: "swap" is not an event`},
		{map[string]string{"FLOWBOX_ALERT_FAILURE_RATE": "10"}, "FLOWBOX_ALERT_FAILURE_RATE"},
		{map[string]string{"FLOWBOX_ALERT_FAILURE_RATE": "0/5m"}, "FLOWBOX_ALERT_FAILURE_RATE"},
		{map[string]string{"FLOWBOX_ALERT_FAILURE_RATE": "10/five minutes"}, "FLOWBOX_ALERT_FAILURE_RATE"},
		{map[string]string{"FLOWBOX_ALERT_FAILURE_RATE": "10/-5m"}, "FLOWBOX_ALERT_FAILURE_RATE"},
		{map[string]string{"FLOWBOX_ALERT_RETRY_DELAY": "soon"}, "FLOWBOX_ALERT_RETRY_DELAY"},
	}
	for _, tc := range tests {
		_, err := Parse(env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.env, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "t0ken") {
			t.Errorf("%v: the error repeats the URL: %v", tc.env, err)
		}
	}
}
