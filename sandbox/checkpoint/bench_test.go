package checkpoint

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkCheckpoint measures the pool on issue 33's workspace: 1 GiB
// in 10,000 files, of which each turn changes 10 (100 KiB each).
//
//   - checkpoint-p50-ms: a checkpoint after such a turn;
//   - restore-p50-ms: a rewind to an earlier checkpoint;
//   - fork-p50-ms: a new sandbox's files from a checkpoint;
//   - the baselines in the same run, what a checkpoint costs without a
//     snapshot: copy-ms, a copy of the workspace's bytes (cp -a), and
//     reflink-copy-ms, a copy of its files sharing their blocks (cp -a
//     --reflink, as XFS would do it);
//   - disk-MiB-20: what 20 checkpoints took on the filesystem beside
//     the 20 MiB the turns wrote (changed-MiB-20).
//
// Run: FLOWBOX_TEST_REQUIRE=btrfs go test -run '^$' -bench Checkpoint -benchtime 50x ./sandbox/checkpoint/
func BenchmarkCheckpoint(b *testing.B) {
	p := newPoolOf(b, 8<<30)
	const id = "aaaaaaaaaaaaaaaa"
	if err := p.Create(id, 0); err != nil {
		b.Fatal(err)
	}
	ws := filepath.Join(p.Dir(id), "workspace")
	block := make([]byte, 100<<10)
	for d := 0; d < 100; d++ {
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			fill(block, d*100+f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", f)), block, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	syscall.Sync()
	turnNo := 0
	turn := func() {
		turnNo++
		for i := 0; i < 10; i++ {
			fill(block, 1_000_000+turnNo*10+i)
			path := filepath.Join(ws, fmt.Sprintf("d%02d/f%02d", (turnNo*7+i)%100, (turnNo*3+i*11)%100))
			if err := os.WriteFile(path, block, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}

	// Disk: 20 turns and their checkpoints, on a settled filesystem.
	used := func() int64 {
		syscall.Sync()
		var fs unix.Statfs_t
		if err := unix.Statfs(p.Root(), &fs); err != nil {
			b.Fatal(err)
		}
		return int64(fs.Blocks-fs.Bfree) * fs.Bsize
	}
	before := used()
	for i := 0; i < 20; i++ {
		turn()
		if _, err := p.Checkpoint(id, fmt.Sprintf("disk%02d", i)); err != nil {
			b.Fatal(err)
		}
	}
	grew := used() - before

	// The baselines: a copy of the workspace, of its bytes and of its
	// files' extents (reflinks, as XFS would make a checkpoint).
	copyMs := func(reflink string) float64 {
		start := time.Now()
		if out, err := exec.Command("cp", "-a", "--reflink="+reflink, ws, filepath.Join(p.Root(), "copy")).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		syscall.Sync()
		d := time.Since(start)
		if err := os.RemoveAll(filepath.Join(p.Root(), "copy")); err != nil {
			b.Fatal(err)
		}
		return float64(d.Milliseconds())
	}
	copied, reflinked := copyMs("never"), copyMs("always")

	b.ResetTimer()
	var cp, rs, fk []time.Duration
	for i := 0; i < b.N; i++ {
		turn()
		t0 := time.Now()
		if _, err := p.Checkpoint(id, fmt.Sprintf("c%04d", i)); err != nil {
			b.Fatal(err)
		}
		cp = append(cp, time.Since(t0))
		t0 = time.Now()
		if err := p.Restore(id, fmt.Sprintf("disk%02d", i%20)); err != nil {
			b.Fatal(err)
		}
		rs = append(rs, time.Since(t0))
		t0 = time.Now()
		fid := fmt.Sprintf("f%015d", i)
		if err := p.Fork(id, fmt.Sprintf("c%04d", i), fid, 0); err != nil {
			b.Fatal(err)
		}
		fk = append(fk, time.Since(t0))
		b.StopTimer()
		if err := p.Delete(fid); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(p50(cp), "checkpoint-p50-ms")
	b.ReportMetric(p50(rs), "restore-p50-ms")
	b.ReportMetric(p50(fk), "fork-p50-ms")
	b.ReportMetric(copied, "copy-ms")
	b.ReportMetric(reflinked, "reflink-copy-ms")
	b.ReportMetric(float64(grew)/(1<<20), "disk-MiB-20")
	b.ReportMetric(20*10*float64(len(block))/(1<<20), "changed-MiB-20")
}

// fill makes block's bytes depend on seed, so that no two files share
// blocks by chance.
func fill(block []byte, seed int) {
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := 0; i+8 <= len(block); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := 0; j < 8; j++ {
			block[i+j] = byte(x >> (8 * j))
		}
	}
}
