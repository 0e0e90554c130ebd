package workers

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the workers' Prometheus metrics.
//
//	flowbox_worker_tasks_processed_total{type}   tasks handled, failed or not
//	flowbox_worker_tasks_failed_total{type}      tasks whose handler returned an error
//	flowbox_sandbox_scans_total{result}          stop scans run ("scanned") or left to another worker ("skipped")
//	flowbox_sandbox_scan_duration_seconds        duration of the stop scans that ran
//	flowbox_sandboxes_stopped_total              sandboxes the stop scan stopped
//	flowbox_sandboxes_deleted_total              sandboxes deleted with their chat or app
//	flowbox_reconcile_repairs_total{kind}        what reconciliation fixed: requeued_deletion,
//	                                             stale_claim, orphan, vanished, pool_member
//	flowbox_deletion_enqueue_failures_total      deletions recorded whose task could not be queued
type Metrics struct {
	processed       *prometheus.CounterVec
	failed          *prometheus.CounterVec
	scans           *prometheus.CounterVec
	scanDuration    prometheus.Histogram
	stopped         prometheus.Counter
	deleted         prometheus.Counter
	repairs         *prometheus.CounterVec
	enqueueFailures prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg; nil reg
// registers them nowhere. Registering twice with one registry panics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbox_worker_tasks_processed_total", Help: "Tasks handled, failed or not, by type.",
		}, []string{"type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbox_worker_tasks_failed_total", Help: "Tasks whose handler returned an error, by type.",
		}, []string{"type"}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbox_sandbox_scans_total", Help: "Stop scans run (scanned) or left to the worker that holds the period (skipped).",
		}, []string{"result"}),
		scanDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "flowbox_sandbox_scan_duration_seconds", Help: "Duration of the stop scans that ran.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8), // 10ms to about 3 minutes
		}),
		stopped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_sandboxes_stopped_total", Help: "Sandboxes the stop scan stopped.",
		}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_sandboxes_deleted_total", Help: "Sandboxes deleted with their chat or app.",
		}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbox_reconcile_repairs_total", Help: "What reconciliation fixed, by kind.",
		}, []string{"kind"}),
		enqueueFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowbox_deletion_enqueue_failures_total", Help: "Deletions recorded whose task could not be queued; reconciliation queues them.",
		}),
	}
	for _, r := range []string{"scanned", "skipped"} {
		m.scans.WithLabelValues(r)
	}
	for _, k := range []string{repairRequeued, repairStaleClaim, repairOrphan, repairVanished, repairActivity, repairPool, repairCheckpoint} {
		m.repairs.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.processed, m.failed, m.scans, m.scanDuration, m.stopped, m.deleted, m.repairs, m.enqueueFailures)
	}
	return m
}

// Kinds of reconciliation repairs.
const (
	repairRequeued   = "requeued_deletion"
	repairStaleClaim = "stale_claim"
	repairOrphan     = "orphan"
	repairVanished   = "vanished"
	repairActivity   = "activity_index" // running sandboxes missing from the stop scan's index
	repairPool       = "pool_member"    // warm pool members without a document, of another shape, or documents without a member
	repairCheckpoint = "checkpoint"     // sandbox files and checkpoints in the checkpoint pool that no sandbox owns
)
