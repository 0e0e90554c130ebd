package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// egressAudit records each connection of the egress proxy in the audit,
// under the chat of the sandbox that opened it.
func egressAudit(s *Services, log *slog.Logger) func(context.Context, egress.Event) {
	host, _ := os.Hostname()
	instance := fmt.Sprintf("%s/%d", host, os.Getpid())
	return func(ctx context.Context, ev egress.Event) {
		rec := audit.Record{ID: bson.NewObjectID(), Time: ev.Start.UTC().Truncate(time.Millisecond), DurationMs: ev.Duration.Milliseconds(),
			Instance: instance, Kind: audit.KindEgress, Tool: "egress", SandboxID: ev.SandboxID,
			Command: fmt.Sprintf("%s %s:%d", ev.Method, ev.Host, ev.Port), Reason: ev.Reason,
			Decision: audit.Allowed, Status: audit.StatusSuccess, Bytes: ev.BytesUp + ev.BytesDown}
		switch ev.Decision {
		case egress.Refused:
			rec.Decision, rec.Status, rec.Rule = audit.Refused, audit.StatusRefused, "egress"
		case egress.Failed:
			rec.Status = audit.StatusFailed
		}
		if s.Provider != nil {
			if inst, err := s.Store.Get(ctx, s.Provider.Name(), ev.SandboxID); err == nil {
				rec.AppID, rec.ChatID, rec.UserID = inst.AppID, inst.ChatID, inst.UserID
			}
		}
		s.Alerter.Observe(rec)
		s.AuditWriter.Write(ctx, rec)
	}
}
