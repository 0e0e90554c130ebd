package policy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Merge applies an app's policy on top of the operator's base. The app
// may only tighten: its forbid and ask rules are added to the base's; it
// may switch a denylist to an allowlist; under a base allowlist its allow
// rules must each lie within one of the base's (same or narrower command,
// the base rule's argument patterns all repeated), and then replace the
// base's allow rules; its limits may only be lower. A looser setting is
// an error naming the field, never silently clamped: an app author who
// asks for more than the operator grants learns it when saving, not when
// a command behaves differently. Rule ids must not collide.
func Merge(base, app Policy) (Policy, error) {
	if err := base.Validate(); err != nil {
		return Policy{}, fmt.Errorf("base %w", err)
	}
	if err := app.Validate(); err != nil {
		return Policy{}, fmt.Errorf("app %w", err)
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	out := Policy{Mode: base.mode(), UseBuiltinDenylist: base.UseBuiltinDenylist}
	switch {
	case app.Mode == "":
	case app.mode() == Allowlist:
		out.Mode = Allowlist
	case base.mode() == Allowlist:
		bad("mode: the operator's policy is an allowlist; an app cannot make it a denylist")
	}
	if app.UseBuiltinDenylist != nil {
		switch {
		case *app.UseBuiltinDenylist:
			t := true
			out.UseBuiltinDenylist = &t
		case base.builtin():
			bad("useBuiltinDenylist: the operator's policy applies the built-in denylist; an app cannot turn it off")
		}
	}

	ids := map[string]bool{}
	for _, r := range base.Rules {
		ids[r.ID] = true
	}
	var appAllows []Rule
	for i, r := range app.Rules {
		if ids[r.ID] {
			bad("rules[%d]: id %q is already used by the operator's policy", i, r.ID)
		}
		if r.Decision != Allow {
			continue
		}
		if base.mode() == Allowlist {
			if !withinSome(r, base.Rules) {
				bad("rules[%d] (%q): allows %s beyond the operator's allowlist (%s)", i, r.ID, strings.Join(r.Command, ", "), strings.Join(base.AllowedCommands(), ", "))
			}
		}
		appAllows = append(appAllows, r)
	}
	for _, r := range base.Rules {
		if r.Decision == Allow && len(appAllows) > 0 && out.Mode == Allowlist {
			continue // the app's allowlist, checked to lie within these, replaces them
		}
		out.Rules = append(out.Rules, r)
	}
	for _, r := range app.Rules {
		if r.Decision != Allow || out.Mode == Allowlist {
			out.Rules = append(out.Rules, r)
		}
	}

	out.Terminal.Transcript = base.Terminal.Transcript || app.Terminal.Transcript
	out.Limits = base.Limits
	lower := func(field string, b, a float64, set func()) {
		switch {
		case a == 0:
		case b != 0 && a > b:
			bad("limits.%s: %v is above the operator's %v", field, a, b)
		default:
			set()
		}
	}
	bl, al := base.Limits, app.Limits
	lower("timeoutSeconds", float64(bl.TimeoutSeconds), float64(al.TimeoutSeconds), func() { out.Limits.TimeoutSeconds = al.TimeoutSeconds })
	lower("memoryMiB", float64(bl.MemoryMiB), float64(al.MemoryMiB), func() { out.Limits.MemoryMiB = al.MemoryMiB })
	lower("cpus", bl.CPUs, al.CPUs, func() { out.Limits.CPUs = al.CPUs })
	lower("pids", float64(bl.Pids), float64(al.Pids), func() { out.Limits.Pids = al.Pids })
	lower("outputBytes", float64(bl.OutputBytes), float64(al.OutputBytes), func() { out.Limits.OutputBytes = al.OutputBytes })
	lower("toolCallsPerRun", float64(bl.ToolCallsPerRun), float64(al.ToolCallsPerRun), func() { out.Limits.ToolCallsPerRun = al.ToolCallsPerRun })
	lower("toolCallsPerChat", float64(bl.ToolCallsPerChat), float64(al.ToolCallsPerChat), func() { out.Limits.ToolCallsPerChat = al.ToolCallsPerChat })

	out.DestructiveTools = base.ForDestructiveTools()
	if app.DestructiveTools != "" {
		if strictness(app.ForDestructiveTools()) < strictness(out.DestructiveTools) {
			bad("destructiveTools: the operator's policy says %s; an app can only make it stricter", out.DestructiveTools)
		} else {
			out.DestructiveTools = app.DestructiveTools
		}
	}

	if len(problems) > 0 {
		return Policy{}, errors.New("app policy loosens the operator's: " + strings.Join(problems, "; "))
	}
	return out, nil
}

// withinSome reports whether every command allow rule a matches is also
// matched by one of base's allow rules.
func withinSome(a Rule, base []Rule) bool {
	for _, b := range base {
		if b.Decision == Allow && b.WhenMode != Denylist && within(a, b) {
			return true
		}
	}
	return false
}

// within: a's commands are each one of b's globs or a literal name b's
// globs match; b's argument patterns, redirect and feeder conditions are
// all repeated in a (a may add more, which narrows it).
func within(a, b Rule) bool {
	if a.Check != "" || b.Check != "" || len(a.Command) == 0 {
		return false
	}
	for _, c := range a.Command {
		ok := false
		for _, g := range b.Command {
			if c == g || (!strings.ContainsAny(c, "*?[\\") && glob(g, c) && (strings.Contains(g, "/") == strings.Contains(c, "/") || g == "*")) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, pb := range b.Args {
		if !slices.ContainsFunc(a.Args, func(pa ArgMatch) bool { return reflect.DeepEqual(pa, pb) }) {
			return false
		}
	}
	narrows := func(ga, gb Globs) bool { return len(gb) == 0 || reflect.DeepEqual(ga, gb) }
	return narrows(a.Redirect, b.Redirect) && narrows(a.FedBy, b.FedBy) && (b.WhenMode == "" || a.WhenMode == b.WhenMode)
}
