package web

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
	On      bool
	Err     string
	Stats   sandbox.PoolStats
	Misses  []poolMiss
	Average string // mean refill time of this process's refills
	Last    string
}

type poolMiss struct {
	Reason string
	Count  uint64
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

// The admin page's words for the warm pool.
func init() {
	for lang, words := range map[string]map[string]string{
		"en": {
			"poolTitle":       "Warm pool",
			"poolHint":        "Started sandboxes kept for new chats, so that a chat's first command does not wait for a sandbox to be created. Its size is FLOWBOX_SANDBOX_POOL_SIZE (0 turns it off); only chats whose sandbox has the pool's shape use it. Claims, misses and refills count since this engine process started.",
			"poolOff":         "The warm pool is off (FLOWBOX_SANDBOX_POOL_SIZE=0, or a provider that cannot adopt sandboxes).",
			"poolSize":        "Size",
			"poolShape":       "Shape",
			"poolReady":       "Ready",
			"poolCreating":    "Being created",
			"poolClaims":      "Claims",
			"poolMisses":      "Misses",
			"poolRefills":     "Refills",
			"poolRefill":      "Refill time (mean / last)",
			"poolErrors":      "Refill failures",
			"poolUnread":      "The pool's members could not be read:",
			"poolMiss-empty":  "pool empty",
			"poolMiss-shape":  "other shape",
			"poolMiss-failed": "adoption failed",
		},
		"zh": {
			"poolTitle":       "预热池",
			"poolHint":        "为新对话预先启动的沙盒,使对话的第一条命令无需等待沙盒创建。大小由 FLOWBOX_SANDBOX_POOL_SIZE 设置(0 表示关闭);只有沙盒规格与池相同的对话会使用它。领取、未命中与补充的次数自本引擎进程启动起计。",
			"poolOff":         "预热池已关闭(FLOWBOX_SANDBOX_POOL_SIZE=0,或沙盒提供方不支持领取)。",
			"poolSize":        "大小",
			"poolShape":       "规格",
			"poolReady":       "就绪",
			"poolCreating":    "创建中",
			"poolClaims":      "领取",
			"poolMisses":      "未命中",
			"poolRefills":     "补充",
			"poolRefill":      "补充耗时(平均 / 最近)",
			"poolErrors":      "补充失败",
			"poolUnread":      "无法读取池中的沙盒:",
			"poolMiss-empty":  "池空",
			"poolMiss-shape":  "规格不同",
			"poolMiss-failed": "领取失败",
		},
	} {
		for k, s := range words {
			labels[lang][k] = s
		}
	}
}
