package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/flowbox/flowbox/internal/outbound"
)

// Trust holds the settings of what the engine believes about its callers
// and where it sends requests on their behalf.
type Trust struct {
	// OutboundAllow lists the exceptions to the outbound client's refusal
	// of loopback, private and link-local destinations (identity hooks,
	// MCP HTTP servers, the alert webhook). FLOWBOX_OUTBOUND_ALLOW, a
	// comma list of CIDRs and host[:port]; default none.
	OutboundAllow outbound.Allow
	// TrustedProxies are the peers whose X-Forwarded-For names the
	// client. FLOWBOX_TRUSTED_PROXIES, a comma list of addresses or
	// CIDRs; default none: the peer's address is the client's.
	TrustedProxies []string
	// ServiceTools are the tools service-API callers without an app (a
	// personal key, the service key) may call, as names or "prefix:*".
	// FLOWBOX_SERVICE_TOOLS; default the sandbox tools (shell:*, file:*,
	// skill:*); "none" for none. Apps' sessions call the sandbox's tools
	// and what their app lists.
	ServiceTools []string
	// LoginAccountBurst is how many failed sign-ins one account name
	// takes before it is throttled to one every 6 seconds (from any
	// address). FLOWBOX_LOGIN_ACCOUNT_BURST, default 10.
	LoginAccountBurst int
}

// DefaultServiceTools are the tools service-API callers without an app
// get unless the operator says otherwise: the sandbox's own.
const DefaultServiceTools = "shell:*,file:*,skill:*"

// trust reads FLOWBOX_OUTBOUND_ALLOW, FLOWBOX_TRUSTED_PROXIES,
// FLOWBOX_SERVICE_TOOLS and FLOWBOX_LOGIN_ACCOUNT_BURST.
func trust(str func(key, def string) string, integer func(key string, def int64) int64, errs *[]string) Trust {
	var t Trust
	var err error
	if t.OutboundAllow, err = outbound.ParseAllow(str("FLOWBOX_OUTBOUND_ALLOW", "")); err != nil {
		*errs = append(*errs, fmt.Sprintf("FLOWBOX_OUTBOUND_ALLOW: %v", err))
	}
	for _, p := range list(str("FLOWBOX_TRUSTED_PROXIES", "")) {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				*errs = append(*errs, fmt.Sprintf("FLOWBOX_TRUSTED_PROXIES: %q is neither an address nor a CIDR (e.g. 10.0.0.0/8)", p))
				continue
			}
		}
		t.TrustedProxies = append(t.TrustedProxies, p)
	}
	t.ServiceTools = list(str("FLOWBOX_SERVICE_TOOLS", DefaultServiceTools))
	if len(t.ServiceTools) == 1 && t.ServiceTools[0] == "none" {
		t.ServiceTools = []string{} // not nil: nil means the default
	}
	for _, name := range t.ServiceTools {
		if !strings.Contains(name, ":") {
			*errs = append(*errs, fmt.Sprintf("FLOWBOX_SERVICE_TOOLS: %q has no resource prefix; name tools as shell:exec, exec:weather, mcp:docs/search or prefix:* (or none)", name))
		}
	}
	t.LoginAccountBurst = int(integer("FLOWBOX_LOGIN_ACCOUNT_BURST", 10))
	if t.LoginAccountBurst == 0 {
		*errs = append(*errs, "FLOWBOX_LOGIN_ACCOUNT_BURST=0 would refuse every sign-in; allow at least 1")
	}
	return t
}

// list splits a comma list, dropping blanks.
func list(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
