package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

// TestOutputLimit: each stream passes its first bytes up to the call's
// limit, cut at a character boundary, live and in the result, then says
// how much was left out; no limit leaves the output alone.
func TestOutputLimit(t *testing.T) {
	p := newScripted(t, func(ctx context.Context, req sandbox.ExecRequest, col *sandbox.Collector) int {
		chunks(col, "héllo ", sandbox.Stderr, "oops", sandbox.Stdout, "world and more")
		return 0
	})
	limits := map[string]int64{"cut": 2, "none": 0}
	limit := sandbox.OutputLimit(func(ctx context.Context, call *sandbox.Call) int64 { return limits[call.Request.Command] })
	m := newManager(t, sandbox.Config{Provider: p, Middleware: []sandbox.Middleware{limit}})

	l := &live{t: t}
	res, err := l.exec(ctx(t), m, newScope(t), sandbox.ExecRequest{Command: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	// "hé" is 3 bytes: the cut keeps "h" rather than half of "é".
	wantOut := "h\n... [20 bytes left out: the app's policy limits output to 2 bytes a stream] ...\n"
	wantErr := "oo\n... [2 bytes left out: the app's policy limits output to 2 bytes a stream] ...\n"
	if res.Stdout != wantOut || res.Stderr != wantErr {
		t.Errorf("result: stdout %q stderr %q; want %q and %q", res.Stdout, res.Stderr, wantOut, wantErr)
	}
	if out, errOut := l.streams(); out != wantOut || errOut != wantErr {
		t.Errorf("live: stdout %q stderr %q; want the result's", out, errOut)
	}

	res, err = m.Exec(ctx(t), newScope(t), sandbox.ExecRequest{Command: "none"})
	if err != nil || res.Stdout != "héllo world and more" || strings.Contains(res.Stderr, "left out") {
		t.Errorf("no limit: %+v, %v; want the whole output", res, err)
	}
}
