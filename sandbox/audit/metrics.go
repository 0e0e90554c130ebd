package audit

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the audit's Prometheus metrics.
//
//	flowbox_sandbox_commands_total{result}   commands through the chain, by result:
//	                                         success, failed, timed_out, refused
//	                                         (a policy or a cap), error (anything else:
//	                                         provider unavailable, chat deleted, client gone)
//	flowbox_sandbox_oom_kills_total          commands during which the OOM killer of their
//	                                         sandbox's memory limit killed a process
//	flowbox_sandbox_pids_limit_hits_total    commands during which a fork failed at their
//	                                         sandbox's process limit
//	flowbox_audit_write_failures_total       records that could not be written (logged)
//	flowbox_audit_buffer_full_total          records written on the command's path because
//	                                         the writer's buffer was full
//
// Metrics is a prometheus.Collector: register it once with the engine's
// registry.
type Metrics struct {
	commands      *prometheus.CounterVec
	oomKills      prometheus.Counter
	pidsLimitHits prometheus.Counter
	writeFailures prometheus.Counter
	bufferFull    prometheus.Counter
}

// Results of flowbox_sandbox_commands_total.
const (
	ResultSuccess  = "success"
	ResultFailed   = "failed"
	ResultTimedOut = "timed_out"
	ResultRefused  = "refused"
	ResultError    = "error"
)

// NewMetrics creates the metrics, registered nowhere.
func NewMetrics() *Metrics {
	m := &Metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbox_sandbox_commands_total", Help: "Commands through the sandbox chain, by result (success, failed, timed_out, refused, error).",
		}, []string{"result"}),
		oomKills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_sandbox_oom_kills_total", Help: "Commands during which the OOM killer of their sandbox's memory limit killed a process (providers that report it).",
		}),
		pidsLimitHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_sandbox_pids_limit_hits_total", Help: "Commands during which a fork failed at their sandbox's process limit (providers that report it).",
		}),
		writeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_audit_write_failures_total", Help: "Audit records that could not be written; each failure is logged.",
		}),
		bufferFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_audit_buffer_full_total", Help: "Audit records written on the command's path because the writer's buffer was full.",
		}),
	}
	for _, r := range []string{ResultSuccess, ResultFailed, ResultTimedOut, ResultRefused, ResultError} {
		m.commands.WithLabelValues(r)
	}
	return m
}

var _ prometheus.Collector = (*Metrics)(nil)

func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.commands.Describe(ch)
	m.oomKills.Describe(ch)
	m.pidsLimitHits.Describe(ch)
	m.writeFailures.Describe(ch)
	m.bufferFull.Describe(ch)
}

func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.commands.Collect(ch)
	m.oomKills.Collect(ch)
	m.pidsLimitHits.Collect(ch)
	m.writeFailures.Collect(ch)
	m.bufferFull.Collect(ch)
}

// result is the metric's label for a command's status.
func result(s Status) string {
	switch s {
	case StatusSuccess:
		return ResultSuccess
	case StatusFailed:
		return ResultFailed
	case StatusTimedOut:
		return ResultTimedOut
	case StatusRefused, StatusLimited, StatusPending, StatusRejected:
		return ResultRefused
	}
	return ResultError
}
