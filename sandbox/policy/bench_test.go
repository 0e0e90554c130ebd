package policy

import "testing"

// go test -run '^$' -bench Judge -benchmem ./sandbox/policy/
func BenchmarkJudge(b *testing.B) {
	cases := []struct{ name, cmd string }{
		{"typical", `cd /workspace && grep -rn "TODO" src | head -20`},
		{"compound", `set -e; x=build; for f in a b c; do if [ -f "$f.txt" ]; then cat "$f.txt" | sort | uniq -c > "$x/$f.out"; fi; done; ` +
			`find . -name '*.tmp' -print0 | xargs -0 rm -f; bash -c "ls -la $x && wc -l $x/*.out"; ` +
			`echo "$(date) done" >> log.txt || { echo failed >&2; exit 1; }`},
	}
	for _, p := range []struct {
		name string
		p    Policy
	}{{"denylist", denylist}, {"allowlist", allowlist}} {
		for _, c := range cases {
			b.Run(p.name+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					p.p.Judge(c.cmd, nil)
				}
			})
		}
	}
}
