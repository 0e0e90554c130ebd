package docker

// The tests run as a dynamically linked binary, which cannot be the
// default agent; these stand a static engine binary in for the running
// executable.

// ResolveAgent exposes resolveAgent: it returns the agent binary's path
// as the daemon sees it (empty for Docker execs) and why the default
// agent is not used.
func ResolveAgent(cfg Config, executable string) (daemonPath string, fallback, err error) {
	a, err := resolveAgent(cfg, func() (string, error) { return executable, nil })
	return a.daemon, a.fallback, err
}

// NewRunningAs is New in an engine whose executable is at executable.
func NewRunningAs(cfg Config, executable string) (*Provider, error) {
	return newProvider(cfg, func() (string, error) { return executable, nil })
}

// DaemonPath exposes daemonPath.
var DaemonPath = daemonPath

// IsGVisor exposes isGVisor.
var IsGVisor = isGVisor
