// Package web is the engine's HTTP surface: the API, the embedded UI and
// the admin pages. It maps errors to HTTP statuses at the edge and must
// never reach a sandbox except through the sandbox.Manager.
package web

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Check is one dependency /readyz verifies (the database, Redis, the
// sandbox provider).
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Config configures the router.
type Config struct {
	// Ready are the checks of /readyz.
	Ready []Check
	// Metrics serves /metrics (Prometheus); nil leaves the route out.
	Metrics http.Handler
	// Queues is the task queue dashboard (asynqmon), served to admins at
	// QueuesPath; nil leaves it out.
	Queues http.Handler
	// AdminToken guards the admin routes for operators without an admin
	// account. Empty: only signed-in admins reach them.
	AdminToken string
	// Product is the user-facing part: accounts, chat, apps, files, pages.
	// Nil leaves it out (a worker's metrics-only server).
	Product *Product
}

// QueuesPath is where the queue dashboard is mounted; the dashboard must
// be built with it as its root path.
const QueuesPath = "/admin/queues"

// New returns the engine's HTTP handler. Every route is listed here,
// grouped by who may call it.
func New(cfg Config) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())

	// Public: liveness and readiness for load balancers and operators.
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", readyz(cfg.Ready))
	// Metrics carry counts and durations, nothing about users; keep the
	// port off the internet or filter /metrics at the proxy.
	if cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(cfg.Metrics))
	}

	// Admin: operators' pages, behind the admin token.
	var auth Authenticator
	if cfg.Product != nil {
		auth = cfg.Product.Auth
	}
	admin := r.Group("/admin", adminGate(auth, cfg.AdminToken))
	if cfg.Queues != nil {
		queues := gin.WrapH(cfg.Queues)
		admin.Any(strings.TrimPrefix(QueuesPath, "/admin"), queues)
		admin.Any(strings.TrimPrefix(QueuesPath, "/admin")+"/*path", queues)
	}
	if cfg.Product != nil {
		cfg.Product.register(r, admin)
	}
	return r
}

// readyz runs every check with a deadline and reports each one, so an
// operator sees which dependency is down and why.
func readyz(checks []Check) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
		defer cancel()
		status := http.StatusOK
		results := gin.H{}
		for _, ch := range checks {
			if err := ch.Fn(ctx); err != nil {
				status = http.StatusServiceUnavailable
				results[ch.Name] = err.Error()
			} else {
				results[ch.Name] = "ok"
			}
		}
		c.JSON(status, gin.H{"ready": status == http.StatusOK, "checks": results})
	}
}
