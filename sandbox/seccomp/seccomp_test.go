package seccomp

import (
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// TestProgram checks the filter assembles, starts with the architecture
// check, and names only system calls that exist here or are known absent.
func TestProgram(t *testing.T) {
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		t.Fatalf("program of %d bytes, want whole 8-byte instructions", len(prog))
	}
	if n := len(prog) / 8; n > 4096 {
		t.Fatalf("%d instructions: over the kernel's BPF_MAXINSNS", n)
	}
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	missing := 0
	for _, n := range Denied {
		if _, ok := info.SyscallNames[n]; !ok {
			missing++
			t.Logf("%s does not exist on %s", n, info.Name)
		}
	}
	if missing > len(Denied)/4 {
		t.Errorf("%d of %d denied names unknown on %s: a typo'd list denies nothing", missing, len(Denied), info.Name)
	}
}
