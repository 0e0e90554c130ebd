// Package seccomp builds the seccomp filter of the bwrap provider's
// sandboxes (T2): a classic BPF program, compiled in pure Go (the engine is
// one static binary), that bwrap loads with --seccomp before it runs the
// sandbox's program, with no_new_privs set.
//
// The filter refuses with EPERM every system call Docker's default profile
// refuses to a container without capabilities (the kernel's module, key,
// mount, namespace, clock, swap, reboot, BPF and tracing interfaces,
// io_uring), namespace flags on clone, and clone3 with ENOSYS so that the C
// library falls back to clone, whose flags the filter can read. Any
// architecture but the engine's own (32-bit calls through int 0x80, the
// x32 ABI) is refused whole: a denylist is only as good as its check of
// the architecture.
//
// It must never allow what it names, and never refuse what ordinary
// programs need (threads, fork, sockets, ptrace of one's own children).
package seccomp

import (
	"encoding/binary"
	"fmt"
	"sync"

	libseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Denied are the system calls the filter refuses, whatever their
// arguments: those Docker's default profile denies to a container without
// capabilities, and unshare and setns, which Docker allows only with
// CAP_SYS_ADMIN.
var Denied = []string{
	// Kernel modules, kexec, reboot, swap, accounting.
	"init_module", "finit_module", "delete_module", "create_module", "query_module", "get_kernel_syms",
	"kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
	// Mounts and namespaces.
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "mount_setattr",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
	// Clocks and the system's identity.
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	// Keys, BPF, tracing, perf, the kernel log.
	"add_key", "request_key", "keyctl", "bpf", "perf_event_open", "lookup_dcookie", "syslog",
	"kcmp", "process_vm_readv", "process_vm_writev",
	// Handles, faults, NUMA, I/O ports, obsolete calls.
	"open_by_handle_at", "name_to_handle_at", "userfaultfd", "move_pages", "mbind",
	"set_mempolicy", "get_mempolicy", "migrate_pages", "ioperm", "iopl", "uselib", "ustat", "sysfs",
	"_sysctl", "nfsservctl", "quotactl", "quotactl_fd", "vhangup", "personality",
	// io_uring bypasses the other rules (Docker refuses it since 25.0).
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// namespaceFlags are clone's flags that make a namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

var (
	once    sync.Once
	program []byte
	progErr error
)

// Program returns the filter as bwrap's --seccomp reads it: struct
// sock_filter entries in the machine's byte order.
func Program() ([]byte, error) {
	once.Do(func() { program, progErr = build() })
	return program, progErr
}

func build() ([]byte, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	var names []string
	for _, n := range Denied {
		if _, ok := info.SyscallNames[n]; ok { // absent on this architecture
			names = append(names, n)
		}
	}
	eperm := libseccomp.ActionErrno | libseccomp.Action(unix.EPERM)
	policy := libseccomp.Policy{
		DefaultAction: libseccomp.ActionAllow,
		Syscalls: []libseccomp.SyscallGroup{
			{Names: names, Action: eperm},
			{NamesWithCondtions: []libseccomp.NameWithConditions{{
				Name:       "clone",
				Conditions: []libseccomp.Condition{{Argument: 0, Operation: libseccomp.BitsSet, Value: namespaceFlags}},
			}}, Action: eperm},
			{Names: []string{"clone3"}, Action: libseccomp.ActionErrno | libseccomp.Action(unix.ENOSYS)},
		},
	}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	// The library's own check sends another architecture to the default
	// action, which is allow here: refuse it first.
	insts = append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(libseccomp.ActionKillProcess)},
	}, insts...)
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}
