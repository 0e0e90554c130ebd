package ui

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// PoolStats reads the warm pool's figures for the admin page
// (sandbox.Manager.PoolStats); ok false: the pool is off.
type PoolStats func(ctx context.Context) (stats sandbox.PoolStats, ok bool, err error)

// poolView is the admin page's warm pool section.
type poolView struct {
	On      bool              `json:"on"`
	Err     string            `json:"err,omitempty"`
	Stats   sandbox.PoolStats `json:"stats"`
	Misses  []poolMiss        `json:"misses"`
	Average string            `json:"average,omitempty"` // mean refill time of this process's refills
	Last    string            `json:"last,omitempty"`
}

type poolMiss struct {
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

func (f PoolStats) view(ctx context.Context) *poolView {
	if f == nil {
		return nil
	}
	stats, ok, err := f(ctx)
	v := &poolView{On: ok, Stats: stats}
	if err != nil {
		v.Err = err.Error()
	}
	for _, reason := range slices.Sorted(maps.Keys(stats.Misses)) {
		v.Misses = append(v.Misses, poolMiss{reason, stats.Misses[reason]})
	}
	if stats.Refills > 0 {
		v.Average = (time.Duration(stats.RefillSeconds / float64(stats.Refills) * float64(time.Second))).Round(time.Millisecond).String()
		v.Last = stats.LastRefill.Round(time.Millisecond).String()
	}
	return v
}
