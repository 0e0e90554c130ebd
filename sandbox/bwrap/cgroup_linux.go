package bwrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/cgroupstat"
)

// cgroups places a sandbox's processes in per-sandbox cgroup v1 groups
// (memory, pids, and cpu when present) under <Mount>/<controller>/<Parent>.
// The engine moves bwrap and the sandbox's init into them while the init
// waits on --block-fd, before the command starts, so nothing the command
// forks can be outside the group.
type cgroups struct {
	mount  string // /sys/fs/cgroup
	parent string // flowbox
}

// controllers the provider uses; memory and pids are required, cpu (the
// CPU limit) and cpuacct (the CPU time metrics read) are used when the
// machine has them.
var controllers = []string{"memory", "pids", "cpu", "cpuacct"}

func (c cgroups) dir(controller, id string) string {
	return filepath.Join(c.mount, controller, c.parent, id)
}

// available returns the controllers mounted and writable here.
func (c cgroups) available() (have []string, err error) {
	if _, err := os.Stat(filepath.Join(c.mount, "cgroup.controllers")); err == nil {
		return nil, fmt.Errorf("%w: %s is cgroup v2; this provider drives cgroup v1 memory/pids controllers", sandbox.ErrUnsupported, c.mount)
	}
	for _, ctl := range controllers {
		parent := filepath.Join(c.mount, ctl, c.parent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			if ctl == "cpu" || ctl == "cpuacct" {
				continue
			}
			return nil, fmt.Errorf("cgroup v1 %s controller is not writable at %s: %w", ctl, parent, err)
		}
		have = append(have, ctl)
	}
	return have, nil
}

// create makes the sandbox's groups and writes its limits. Idempotent.
func (c cgroups) create(ctls []string, id string, lim sandbox.Limits) error {
	for _, ctl := range ctls {
		if err := os.MkdirAll(c.dir(ctl, id), 0o755); err != nil {
			return fmt.Errorf("create %s cgroup: %w", ctl, err)
		}
	}
	write := func(ctl, file, value string) error {
		p := filepath.Join(c.dir(ctl, id), file)
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", p, err)
		}
		return nil
	}
	for _, ctl := range ctls {
		var err error
		switch ctl {
		case "memory":
			if lim.MemoryMiB > 0 {
				bytes := strconv.FormatInt(lim.MemoryMiB<<20, 10)
				err = write(ctl, "memory.limit_in_bytes", bytes)
				// No swap beyond the limit, where the kernel accounts it.
				if err == nil {
					if werr := write(ctl, "memory.memsw.limit_in_bytes", bytes); werr != nil && !errors.Is(werr, fs.ErrNotExist) {
						err = werr
					}
				}
			}
		case "pids":
			if lim.Pids > 0 {
				err = write(ctl, "pids.max", strconv.FormatInt(lim.Pids, 10))
			}
		case "cpu":
			if lim.CPUCount > 0 {
				const period = 100000
				if err = write(ctl, "cpu.cfs_period_us", strconv.Itoa(period)); err == nil {
					err = write(ctl, "cpu.cfs_quota_us", strconv.Itoa(int(lim.CPUCount*period)))
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// join moves the processes into the sandbox's groups.
func (c cgroups) join(ctls []string, id string, pids ...int) error {
	for _, ctl := range ctls {
		f, err := os.OpenFile(filepath.Join(c.dir(ctl, id), "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			// One write per PID: the kernel takes one number a write.
			if _, err = f.WriteString(strconv.Itoa(pid)); err != nil {
				break
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("join %s cgroup of %s: %w", ctl, id, err)
		}
	}
	return nil
}

// pids lists the processes in the sandbox's pids group.
func (c cgroups) pids(id string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(c.dir("pids", id), "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// killAll SIGKILLs every process of the sandbox until none is left or the
// deadline passes. Processes may fork while being killed, hence the loop.
func (c cgroups) killAll(id string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		pids, err := c.pids(id)
		if err != nil {
			return fmt.Errorf("list sandbox processes: %w", err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of sandbox %s survive SIGKILL", len(pids), id)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// remove deletes the sandbox's groups; they must be empty.
func (c cgroups) remove(id string) error {
	var errs []error
	for _, ctl := range controllers {
		d := c.dir(ctl, id)
		var err error
		// A group empties a moment after its last process is reaped.
		for i := 0; i < 100; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// rename gives the sandbox oldID's groups to newID: cgroup v1 renames a
// group within its hierarchy, the processes in it staying, and refuses a
// name that exists. On failure what was renamed is renamed back.
func (c cgroups) rename(ctls []string, oldID, newID string) error {
	var done []string
	for _, ctl := range ctls {
		from, to := c.dir(ctl, oldID), c.dir(ctl, newID)
		err := os.Rename(from, to)
		if err == nil {
			done = append(done, ctl)
			continue
		}
		if _, serr := os.Stat(to); errors.Is(err, fs.ErrNotExist) && serr == nil {
			continue // a controller mounted with one renamed already
		}
		errs := []error{fmt.Errorf("rename %s cgroup of %s: %w", ctl, oldID, err)}
		for i := len(done) - 1; i >= 0; i-- {
			errs = append(errs, os.Rename(c.dir(done[i], newID), c.dir(done[i], oldID)))
		}
		return errors.Join(errs...)
	}
	return nil
}

// exists reports whether the sandbox's groups exist (the pids one decides).
func (c cgroups) exists(id string) bool {
	_, err := os.Stat(c.dir("pids", id))
	return err == nil
}

// exhaustion is what the kernel counted of a sandbox's limits being hit:
// processes the OOM killer of its memory group killed (memory.oom_control
// "oom_kill", kernels from 4.13) and forks its pids group refused
// (pids.events "max"). -1: the counter is not there to read.
type exhaustion = cgroupstat.Counters

// exhaustion reads the sandbox's counters. They only grow while the
// groups exist, so a command's share is the difference of two readings.
func (c cgroups) exhaustion(id string) exhaustion {
	return exhaustion{
		OOMKills: cgroupstat.Read(filepath.Join(c.dir("memory", id), "memory.oom_control"), "oom_kill"),
		PidsMax:  cgroupstat.Read(filepath.Join(c.dir("pids", id), "pids.events"), "max"),
	}
}
