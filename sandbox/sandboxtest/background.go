package sandboxtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// testBackground: a background process starts where the last command
// left the shell, outlives the commands after it, is listed, stopped,
// and ends with the sandbox.
func testBackground(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	pp, ok := p.(sandbox.ProcessProvider)
	needs(t, p, ok, "background processes")
	procs := pp.Background()
	ctx := ctxFor(t)
	run(t, p, id, "cd /tmp && export BG_MARK=7431", 30*time.Second)

	started, err := procs.StartProcess(ctx, id, `echo "$BG_MARK $(pwd)"; exec sleep 7432`)
	if errors.Is(err, sandbox.ErrUnsupported) {
		t.Skipf("this configuration keeps no background processes: %v", err)
	}
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	output := func(pid string) string {
		out, err := procs.ReadProcess(ctx, id, pid, 0, 0)
		if err != nil {
			t.Fatalf("ReadProcess: %v", err)
		}
		return string(out.Data)
	}
	eventually(t, ctx, "the process's output", func() bool { return output(started.ID) == "7431 /tmp\n" })
	// Commands come and go; it stays, and the command sees it.
	// (The pattern's brackets keep the command from finding itself.)
	const count = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -o 'sleep 743[2]' | wc -l"
	if res := run(t, p, id, count, 30*time.Second); strings.TrimSpace(res.Stdout) != "1" {
		t.Errorf("a command finds %q processes of the background one, want 1 (stderr %q)", res.Stdout, res.Stderr)
	}
	list, err := procs.ListProcesses(ctx, id)
	if err != nil || len(list) != 1 || !list[0].Running || list[0].ID != started.ID {
		t.Fatalf("ListProcesses after a command: %+v, %v; want the one process running", list, err)
	}
	stopped, err := procs.StopProcess(ctx, id, started.ID)
	if err != nil || stopped.Running || !stopped.Stopped {
		t.Fatalf("StopProcess: %+v, %v", stopped, err)
	}
	if res := run(t, p, id, count, 30*time.Second); strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("after the stop a command finds %q", res.Stdout)
	}

	// One left running ends with the sandbox.
	if _, err := procs.StartProcess(ctx, id, "exec sleep 7433"); err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := procs.ListProcesses(ctx, id); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("ListProcesses of a stopped sandbox: %v, want ErrNotRunning", err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	if list, err := procs.ListProcesses(ctx, id); err != nil || len(list) != 0 {
		t.Errorf("after a stop and a start: %+v, %v; want no process", list, err)
	}
	if h.Processes != nil {
		for _, c := range h.Processes(t, p, id) {
			if strings.Contains(c, "sleep 7433") {
				t.Errorf("the background process outlived its sandbox's stop: %q", c)
			}
		}
	}
}
