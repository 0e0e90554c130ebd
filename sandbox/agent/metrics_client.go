package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
)

// Usage reads a sandbox's metrics from its agent (see Metrics), for a
// provider that reaches the agent with this function.
type Usage func(ctx context.Context, id string) (*Conn, error)

// Metrics asks sandbox id's agent what the sandbox uses now. The figures
// are the sandbox's word; one below -1 is read as -1 (not known).
func (d Usage) Metrics(ctx context.Context, id string) (sandbox.Metrics, error) {
	files := Files{Dial: func(ctx context.Context) (*Conn, error) { return d(ctx, id) }}
	data, err := files.collectAfter(ctx, wireRequest{Op: opMetrics}, nil, maxListing)
	if err != nil {
		return sandbox.Metrics{}, err
	}
	var m sandbox.Metrics
	if err := json.Unmarshal(data, &m); err != nil {
		return sandbox.Metrics{}, fmt.Errorf("agent metrics: %w: %v", ErrProtocol, err)
	}
	for _, v := range []*int64{&m.MemoryBytes, &m.MemoryLimitBytes, &m.Processes, &m.DiskBytes} {
		*v = max(*v, -1)
	}
	m.CPUSeconds = max(m.CPUSeconds, -1)
	m.CPUPercent, m.DiskLimitBytes = -1, 0
	return m, nil
}
