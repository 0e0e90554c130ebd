package redact

import (
	"fmt"
	"strings"
	"testing"
)

// typicalOutput is n bytes of what commands print: logs, ls -la, pip
// install, with a secret every few hundred lines.
func typicalOutput(n int) string {
	blocks := []string{
		"2026-01-02T03:04:05.123Z INFO  server: listening on 0.0.0.0:8080 (pid 4242)\n2026-01-02T03:04:05.456Z WARN  cache: miss for key user:1234 after 12ms\n",
		"-rw-r--r--  1 user staff   1204 Jan  2 03:04 go.mod\ndrwxr-xr-x  5 user staff    160 Jan  2 03:04 sandbox\n",
		"Collecting requests>=2.31\n  Downloading requests-2.31.0-py3-none-any.whl (62 kB)\n     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 62.6/62.6 kB 5.1 MB/s eta 0:00:00\n",
		"Successfully installed certifi-2024.2.2 charset-normalizer-3.3.2 idna-3.6 urllib3-2.2.1\n",
		"commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: Dev <dev@example.com>\n    fix: pass the session token to the client\n",
		`{"level":"info","msg":"request done","status":200,"duration_ms":12.5,"path":"/api/v1/items?page=2"}` + "\n",
	}
	secrets := []string{
		"export OPENAI_API_KEY=" + openAIKey + "\n",
		"aws_secret_access_key = " + awsSecretKey + "\n",
		"> Authorization: Bearer " + jwtToken + "\n",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(blocks[i%len(blocks)])
		if i%300 == 299 {
			b.WriteString(secrets[(i/300)%len(secrets)])
		}
	}
	return b.String()[:n]
}

func BenchmarkRedact(b *testing.B) {
	r := mustNew(b, Config{})
	in := typicalOutput(1 << 20)
	if out, fs := r.Redact(in); len(fs) == 0 || strings.Contains(out, awsSecretKey) {
		b.Fatalf("the benchmark input's secrets were not found: %+v", fs)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Redact(in)
	}
}

// BenchmarkRedactOptIns adds email and card detection, which scan every
// '@' and every digit.
func BenchmarkRedactOptIns(b *testing.B) {
	r := mustNew(b, Config{Enable: []string{"email", "credit_card"}})
	in := typicalOutput(1 << 20)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Redact(in)
	}
}

func BenchmarkStream(b *testing.B) {
	r := mustNew(b, Config{})
	in := []byte(typicalOutput(32 << 10))
	for _, chunk := range []int{4 << 10} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				t := r.Transformer()
				for p := in; len(p) > 0; {
					n := min(chunk, len(p))
					t.Transform(p[:n])
					p = p[n:]
				}
				t.Flush()
			}
		})
	}
}

// BenchmarkBaseline is a copy of the same bytes, to compare with.
func BenchmarkBaseline(b *testing.B) {
	in := typicalOutput(1 << 20)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		_ = strings.Clone(in)
	}
}
