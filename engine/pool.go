package engine

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowbox/flowbox/sandbox"
)

// poolCollector exports the warm pool's figures (sandbox.PoolStats):
//
//	flowbox_sandbox_pool_members{state}             target, ready, creating
//	flowbox_sandbox_pool_claims_total               first commands that adopted a member
//	flowbox_sandbox_pool_misses_total{reason}       empty, shape, failed
//	flowbox_sandbox_pool_refills_total              members this process created
//	flowbox_sandbox_pool_refill_seconds_total       their creation times, summed
//	flowbox_sandbox_pool_refill_failures_total      members this process failed to create
//
// The counters are this process's; the members are the database's.
type poolCollector struct{ m *sandbox.Manager }

var (
	poolMembersDesc  = prometheus.NewDesc("flowbox_sandbox_pool_members", "Warm pool members by state: target (the configured size), ready, creating.", []string{"state"}, nil)
	poolClaimsDesc   = prometheus.NewDesc("flowbox_sandbox_pool_claims_total", "New chats' first commands that adopted a warm pool member.", nil, nil)
	poolMissesDesc   = prometheus.NewDesc("flowbox_sandbox_pool_misses_total", "New chats' first commands that found no member to adopt, by reason.", []string{"reason"}, nil)
	poolRefillsDesc  = prometheus.NewDesc("flowbox_sandbox_pool_refills_total", "Warm pool members this process created.", nil, nil)
	poolRefillSecs   = prometheus.NewDesc("flowbox_sandbox_pool_refill_seconds_total", "Time this process spent creating warm pool members.", nil, nil)
	poolFailuresDesc = prometheus.NewDesc("flowbox_sandbox_pool_refill_failures_total", "Warm pool members this process failed to create.", nil, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolMembersDesc, poolClaimsDesc, poolMissesDesc, poolRefillsDesc, poolRefillSecs, poolFailuresDesc} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, ok, err := c.m.PoolStats(ctx)
	if !ok {
		return
	}
	if err == nil {
		ch <- prometheus.MustNewConstMetric(poolMembersDesc, prometheus.GaugeValue, float64(s.Ready), "ready")
		ch <- prometheus.MustNewConstMetric(poolMembersDesc, prometheus.GaugeValue, float64(s.Creating), "creating")
	}
	ch <- prometheus.MustNewConstMetric(poolMembersDesc, prometheus.GaugeValue, float64(s.Size), "target")
	ch <- prometheus.MustNewConstMetric(poolClaimsDesc, prometheus.CounterValue, float64(s.Claims))
	for reason, n := range s.Misses {
		ch <- prometheus.MustNewConstMetric(poolMissesDesc, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(poolRefillsDesc, prometheus.CounterValue, float64(s.Refills))
	ch <- prometheus.MustNewConstMetric(poolRefillSecs, prometheus.CounterValue, s.RefillSeconds)
	ch <- prometheus.MustNewConstMetric(poolFailuresDesc, prometheus.CounterValue, float64(s.RefillErrors))
}
