package audit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox/audit"
)

// alertSink collects what an Alerter sends and suppresses.
type alertSink struct {
	mu         sync.Mutex
	sent       []audit.Alert
	suppressed map[audit.AlertEvent]int
}

func (s *alertSink) send(a audit.Alert) { s.mu.Lock(); defer s.mu.Unlock(); s.sent = append(s.sent, a) }
func (s *alertSink) suppress(e audit.AlertEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.suppressed[e]++
}

// take returns what was sent since the last take.
func (s *alertSink) take() []audit.Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// alertClock is a clock the test moves.
type alertClock struct{ now time.Time }

func (c *alertClock) Now() time.Time      { return c.now }
func (c *alertClock) Add(d time.Duration) { c.now = c.now.Add(d) }
func newAlertClock() *alertClock {
	return &alertClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}
func rec(app string, kind audit.Kind, st audit.Status) audit.Record {
	return audit.Record{AppID: app, Kind: kind, Status: st, Rule: "rm-root"}
}

func newAlerter(clock *alertClock, events ...audit.AlertEvent) (*audit.Alerter, *alertSink) {
	sink := &alertSink{suppressed: map[audit.AlertEvent]int{}}
	a := audit.NewAlerter(audit.AlertConfig{Events: events, FailureCount: 3, FailureWindow: 5 * time.Minute,
		Send: sink.send, Suppressed: sink.suppress, Now: clock.Now})
	return a, sink
}

// TestAlertEventOf: which records are alerts on their own.
func TestAlertEventOf(t *testing.T) {
	tests := []struct {
		kind   audit.Kind
		status audit.Status
		want   audit.AlertEvent
	}{
		{audit.KindCommand, audit.StatusRefused, audit.AlertRefused},
		{audit.KindFile, audit.StatusRefused, audit.AlertRefused},
		{audit.KindCommand, audit.StatusLimited, audit.AlertLimited},
		{audit.KindEgress, audit.StatusRefused, audit.AlertEgressRefused},
		{audit.KindCommand, audit.StatusUnavailable, audit.AlertUnavailable},
		{audit.KindCommand, audit.StatusSuccess, ""},
		{audit.KindCommand, audit.StatusFailed, ""},
		{audit.KindCommand, audit.StatusTimedOut, ""},
		{audit.KindCommand, audit.StatusDeleted, ""},
		{audit.KindCommand, audit.StatusClientGone, ""},
		{audit.KindEgress, audit.StatusFailed, ""},
	}
	for _, tc := range tests {
		got, ok := audit.AlertEventOf(rec("a", tc.kind, tc.status))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s %s: %q %v, want %q", tc.kind, tc.status, got, ok, tc.want)
		}
	}
	// A command that met its sandbox's limits, whatever its status.
	oom := rec("a", audit.KindCommand, audit.StatusFailed)
	oom.OOMKilled = true
	pids := rec("a", audit.KindCommand, audit.StatusTimedOut)
	pids.PidsLimited = true
	for r, want := range map[*audit.Record]audit.AlertEvent{&oom: audit.AlertOOM, &pids: audit.AlertPidsLimit} {
		if got, ok := audit.AlertEventOf(*r); got != want || !ok {
			t.Errorf("%+v: %q %v, want %q", *r, got, ok, want)
		}
	}
}

// TestAlertDedup: one alert per event and app per minute; the others are
// counted, and the next alert carries their count.
func TestAlertDedup(t *testing.T) {
	clock := newAlertClock()
	a, sink := newAlerter(clock, audit.AlertRefused, audit.AlertEgressRefused)

	for range 3 {
		a.Observe(rec("app1", audit.KindCommand, audit.StatusRefused))
		clock.Add(10 * time.Second)
	}
	a.Observe(rec("app2", audit.KindCommand, audit.StatusRefused))
	a.Observe(rec("app1", audit.KindEgress, audit.StatusRefused))
	// Not configured, or no alert at all.
	a.Observe(rec("app1", audit.KindCommand, audit.StatusLimited))
	a.Observe(rec("app1", audit.KindCommand, audit.StatusSuccess))
	a.Observe(rec("app1", audit.KindCommand, audit.StatusFailed))
	got := sink.take()
	if len(got) != 3 || got[0].Event != audit.AlertRefused || got[0].Record.AppID != "app1" || got[0].Suppressed != 0 ||
		got[0].Period != audit.AlertEvery || got[0].Record.Rule != "rm-root" ||
		got[1].Record.AppID != "app2" || got[2].Event != audit.AlertEgressRefused {
		t.Fatalf("sent %+v; want app1's refusal, app2's, app1's egress refusal", got)
	}
	if n := sink.suppressed[audit.AlertRefused]; n != 2 {
		t.Errorf("suppressed %d refusals, want 2", n)
	}

	clock.Add(audit.AlertEvery)
	a.Observe(rec("app1", audit.KindCommand, audit.StatusRefused))
	if got := sink.take(); len(got) != 1 || got[0].Suppressed != 2 {
		t.Errorf("after the window: %+v; want one alert counting 2 suppressed", got)
	}
	a.Observe(rec("app1", audit.KindCommand, audit.StatusRefused))
	if got := sink.take(); len(got) != 0 {
		t.Errorf("within the new window: %+v; want none", got)
	}

	var none *audit.Alerter
	none.Observe(rec("app1", audit.KindCommand, audit.StatusRefused)) // no panic, nothing sent
}

// TestAlertFailureRate: 3 failed or timed-out commands of one app within
// 5 minutes raise one alert; it is not raised again for that app within
// the window, and is again after it.
func TestAlertFailureRate(t *testing.T) {
	clock := newAlertClock()
	a, sink := newAlerter(clock, audit.AlertFailureRate)
	fail := func(app string, st audit.Status) {
		a.Observe(rec(app, audit.KindCommand, st))
		clock.Add(time.Minute)
	}

	// Spread out: never 3 within 5 minutes.
	for range 4 {
		fail("slow", audit.StatusFailed)
		clock.Add(2 * time.Minute)
	}
	// Successes and files do not count.
	a.Observe(rec("busy", audit.KindCommand, audit.StatusSuccess))
	a.Observe(rec("busy", audit.KindFile, audit.StatusError))
	fail("busy", audit.StatusFailed)
	fail("busy", audit.StatusTimedOut)
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("sent %+v before any app reached 3 failures", got)
	}
	fail("busy", audit.StatusFailed)
	got := sink.take()
	if len(got) != 1 || got[0].Event != audit.AlertFailureRate || got[0].Record.AppID != "busy" || got[0].Failures != 3 ||
		got[0].Period != 5*time.Minute {
		t.Fatalf("sent %+v; want one failure_rate alert of busy with 3 failures", got)
	}

	// 3 more within the window: suppressed; 2 more: not even that.
	for range 5 {
		fail("busy", audit.StatusFailed)
	}
	if got := sink.take(); len(got) != 0 || sink.suppressed[audit.AlertFailureRate] != 1 {
		t.Fatalf("within the window: sent %+v, suppressed %d; want none sent, 1 suppressed", got, sink.suppressed[audit.AlertFailureRate])
	}
	clock.Add(5 * time.Minute)
	for range 3 {
		fail("busy", audit.StatusFailed)
	}
	if got := sink.take(); len(got) != 1 || got[0].Suppressed != 1 || got[0].Failures != 3 {
		t.Fatalf("after the window: %+v; want one alert counting 1 suppressed", got)
	}
}
