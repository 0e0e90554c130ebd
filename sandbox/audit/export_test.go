package audit

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func (m *Metrics) BufferFull() float64         { return value(m.bufferFull) }
func (m *Metrics) WriteFailures() float64      { return value(m.writeFailures) }
func (m *Metrics) Commands(res string) float64 { return value(m.commands.WithLabelValues(res)) }
func (m *Metrics) OOMKills() float64           { return value(m.oomKills) }
func (m *Metrics) PidsLimitHits() float64      { return value(m.pidsLimitHits) }
