package audit

import (
	"sync"
	"time"
)

// AlertEvent names what an alert is about (FLOWBOX_ALERT_EVENTS).
type AlertEvent string

const (
	// AlertRefused: a policy rule refused a command or a file operation.
	AlertRefused AlertEvent = "refused"
	// AlertLimited: a cap on running sandboxes refused to start one.
	AlertLimited AlertEvent = "limited"
	// AlertEgressRefused: the egress proxy refused a sandbox's connection.
	AlertEgressRefused AlertEvent = "egress_refused"
	// AlertUnavailable: the provider could not run a call.
	AlertUnavailable AlertEvent = "unavailable"
	// AlertOOM: a command met its sandbox's memory limit (an OOM kill);
	// AlertPidsLimit: its process limit.
	AlertOOM       AlertEvent = "oom"
	AlertPidsLimit AlertEvent = "pids_limit"
	// AlertFailureRate: an app's commands failed or timed out
	// AlertConfig.FailureCount times within AlertConfig.FailureWindow.
	AlertFailureRate AlertEvent = "failure_rate"
)

// AlertEvents lists every event an Alerter knows. Running out of memory
// is not among them: a record does not say why a command was killed.
var AlertEvents = []AlertEvent{AlertRefused, AlertLimited, AlertEgressRefused, AlertUnavailable, AlertOOM, AlertPidsLimit, AlertFailureRate}

// AlertEvery is how long an alert of one event and app silences the next
// ones (failure_rate: AlertConfig.FailureWindow).
const AlertEvery = time.Minute

// Alert is one alert to send.
type Alert struct {
	Event AlertEvent
	// Record raised it; for failure_rate, the failure that reached the
	// threshold.
	Record Record
	// Suppressed counts the alerts of this event and app that were not
	// sent since the previous one, for being within its Period.
	Suppressed int
	// Period is how long this alert silences the next ones of its event
	// and app.
	Period time.Duration
	// Failures is, for failure_rate, how many commands failed or timed
	// out within Period.
	Failures int
}

// AlertConfig configures an Alerter. Zero values have the documented
// defaults.
type AlertConfig struct {
	// Events are the events to alert on; none: the Alerter sends nothing.
	Events []AlertEvent
	// FailureCount failed or timed-out commands of one app within
	// FailureWindow raise one failure_rate alert; 0 turns it off.
	FailureCount  int
	FailureWindow time.Duration
	// Send receives the alerts (required). It is called on the command's
	// path, outside the Alerter's lock: it must not block.
	Send func(Alert)
	// Suppressed, when set, is told of every alert not sent (a counter).
	Suppressed func(AlertEvent)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Alerter decides which audit records are alerts (its Observe is
// Config.OnRecord) and sends them, at most one per event and app per
// AlertEvery, counting the others in the next one's Suppressed. It keeps
// a few values per app and event, in memory: several engine processes
// decide each for itself (what the queue does about that is its own).
// Observe is cheap: a record that is no alert takes no lock.
type Alerter struct {
	cfg    AlertConfig
	events map[AlertEvent]bool

	mu        sync.Mutex
	sent      map[alertKey]*alertState
	failures  map[string][]time.Time // per app, the failures within the window, oldest first
	lastSweep time.Time
}

type alertKey struct {
	event AlertEvent
	app   string
}

type alertState struct {
	at         time.Time // when the last alert was sent
	period     time.Duration
	suppressed int
}

// NewAlerter returns an alerter; it panics without Config.Send.
func NewAlerter(cfg AlertConfig) *Alerter {
	if cfg.Send == nil {
		panic("audit.NewAlerter: AlertConfig.Send is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Alerter{cfg: cfg, events: map[AlertEvent]bool{}, sent: map[alertKey]*alertState{}, failures: map[string][]time.Time{}}
	for _, e := range cfg.Events {
		a.events[e] = true
	}
	if cfg.FailureCount <= 0 || cfg.FailureWindow <= 0 {
		delete(a.events, AlertFailureRate)
	}
	return a
}

// AlertEventOf is the event a record is on its own (failure_rate aside),
// if any.
func AlertEventOf(r Record) (AlertEvent, bool) {
	switch {
	case r.OOMKilled:
		return AlertOOM, true
	case r.PidsLimited:
		return AlertPidsLimit, true
	case r.Kind == KindEgress && r.Status == StatusRefused:
		return AlertEgressRefused, true
	case r.Status == StatusRefused:
		return AlertRefused, true
	case r.Status == StatusLimited:
		return AlertLimited, true
	case r.Status == StatusUnavailable:
		return AlertUnavailable, true
	}
	return "", false
}

// failure reports whether r counts towards failure_rate.
func failure(r Record) bool {
	return r.Kind == KindCommand && (r.Status == StatusFailed || r.Status == StatusTimedOut)
}

// Observe sends the alert r raises, if any. A nil Alerter sends nothing.
func (a *Alerter) Observe(r Record) {
	if a == nil {
		return
	}
	event, single := AlertEventOf(r)
	switch {
	case single && a.events[event]:
	case !single && failure(r) && a.events[AlertFailureRate]:
		event = AlertFailureRate
	default:
		return
	}
	now := a.cfg.Now()
	alert := Alert{Event: event, Record: r, Period: AlertEvery}
	raised, send := true, false
	a.mu.Lock()
	a.sweep(now)
	if event == AlertFailureRate {
		alert.Period = a.cfg.FailureWindow
		alert.Failures = a.countFailure(r.AppID, now)
		raised = alert.Failures > 0
	}
	if raised {
		alert.Suppressed, send = a.gate(event, r.AppID, now, alert.Period)
	}
	a.mu.Unlock()
	switch {
	case send:
		a.cfg.Send(alert)
	case raised && a.cfg.Suppressed != nil:
		a.cfg.Suppressed(event)
	}
}

// gate reports whether an alert of event for app may go now, and how
// many were suppressed since the last one; a suppressed one is counted.
func (a *Alerter) gate(event AlertEvent, app string, now time.Time, period time.Duration) (int, bool) {
	k := alertKey{event, app}
	st := a.sent[k]
	if st != nil && now.Sub(st.at) < period {
		st.suppressed++
		return 0, false
	}
	n := 0
	if st != nil {
		n = st.suppressed
	}
	a.sent[k] = &alertState{at: now, period: period}
	return n, true
}

// countFailure adds a failure of app at now and returns how many there
// were within the window when they reach FailureCount (and starts
// counting again), else 0.
func (a *Alerter) countFailure(app string, now time.Time) int {
	since := now.Add(-a.cfg.FailureWindow)
	times := a.failures[app]
	i := 0
	for i < len(times) && !times[i].After(since) {
		i++
	}
	times = append(times[i:], now)
	if len(times) < a.cfg.FailureCount {
		a.failures[app] = times
		return 0
	}
	delete(a.failures, app)
	return len(times)
}

// sweep forgets, at most once per AlertEvery, the apps and events whose
// windows are over and that hold nothing to report, so that the maps
// hold the apps active lately.
func (a *Alerter) sweep(now time.Time) {
	if now.Sub(a.lastSweep) < AlertEvery {
		return
	}
	a.lastSweep = now
	for k, st := range a.sent {
		if st.suppressed == 0 && now.Sub(st.at) >= st.period {
			delete(a.sent, k)
		}
	}
	for app, times := range a.failures {
		if len(times) == 0 || now.Sub(times[len(times)-1]) >= a.cfg.FailureWindow {
			delete(a.failures, app)
		}
	}
}
