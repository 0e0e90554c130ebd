package redact

import (
	"strings"
	"testing"
)

// streamed runs chunks through a Transformer and returns each piece it let
// out, the flush last.
func streamed(t *Transformer, chunks ...string) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, string(t.Transform([]byte(c))))
	}
	return append(out, string(t.Flush()))
}

// samples are lines holding each kind of secret, with ordinary text
// around them.
var samples = []string{
	"key " + openAIKey + " ok\n",
	"x " + anthropicKey + "\n",
	"k=" + googleKey + "&q",
	"id " + awsAccessKey + " y",
	"aws_secret_access_key = " + awsSecretKey + "\n",
	"t " + githubToken + " " + githubPAT,
	"git clone https://oauth2:" + gitlabToken + "@gitlab.com/x.git\n",
	slackToken + " https://hooks.slack.com/services/" + slackHookPath,
	"s " + stripeKey + "\r\n",
	"jwt " + jwtToken,
	"> Authorization: Bearer abc123def456\r\n",
	"postgres://admin:s3cr3tP4ss@db:5432/app",
	"export FOO_TOKEN=abc123xyz; echo",
	`{"password": "correct horse", "n": 1}`,
	"db:\n  password: hunter22\n",
	"pre\n" + pemKey + "\npost",
	`DB_PASSWORD="q7Vz!pR2#mK9xL4w"` + "\n",
	"//registry.npmjs.org/:_authToken=npm_Ab3dEf5hIj7kLm9nOp1qRs3tUv5wXy7zAb3d\n",
	"HF_TOKEN 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",
	"< set-cookie: session=" + jwtToken + "; Path=/",
}

// However a text is cut in two, or in three, the stream lets out what
// Redact makes of the whole text: a secret cut across chunks is caught,
// and no part of it is let out before it is.
//
// Its tens of thousands of streams are pure computation on one goroutine, where the race
// detector has nothing to find and makes 4 s take two minutes: under
// -race it skips, and scripts/test runs it again without.
func TestStreamSplitAnywhere(t *testing.T) {
	if raceDetector {
		t.Skip("pure computation on one goroutine; scripts/test runs it without -race")
	}
	r := mustNew(t, Config{Enable: []string{"email", "credit_card"}})
	for _, in := range append(samples, "mail a.b@example.com card 4111 1111 1111 1111 end") {
		want := must(r.Redact(in))
		if want == in {
			t.Fatalf("sample %q has no secret", in)
		}
		for i := 0; i <= len(in); i++ {
			got := strings.Join(streamed(r.Transformer(), in[:i], in[i:]), "")
			if got != want {
				t.Fatalf("cut at %d of %q:\n got %q\nwant %q", i, in, got, want)
			}
			for j := i; j <= len(in); j++ {
				got := strings.Join(streamed(r.Transformer(), in[:i], in[i:j], in[j:]), "")
				if got != want {
					t.Fatalf("cut at %d and %d of %q:\n got %q\nwant %q", i, j, in, got, want)
				}
			}
		}
	}
}

// A whole session's output, every sample on one stream, cut into chunks
// of every size from 1 to 64 bytes.
func TestStreamManyChunks(t *testing.T) {
	r := mustNew(t, Config{})
	in := strings.Join(samples, "\n")
	want := must(r.Redact(in))
	for size := 1; size <= 64; size++ {
		var chunks []string
		for s := in; len(s) > 0; {
			n := min(size, len(s))
			chunks, s = append(chunks, s[:n]), s[n:]
		}
		if got := strings.Join(streamed(r.Transformer(), chunks...), ""); got != want {
			t.Fatalf("chunks of %d:\n got %q\nwant %q", size, got, want)
		}
	}
}

// A private key block is held while it arrives, line by line, and let
// out as one marker; the text after it goes out as soon as it is known.
func TestStreamPEMAcrossChunks(t *testing.T) {
	r := mustNew(t, Config{})
	tr := r.Transformer()
	out := streamed(tr, strings.SplitAfter("before\n"+pemKey+"\nafter\n", "\n")...)
	want := []string{"before\n", "", "", "", "", "[REDACTED:private_key]\n", "after\n", "", ""}
	if strings.Join(out, "|") != strings.Join(want, "|") {
		t.Errorf("pieces %q\nwant %q", out, want)
	}
}

// Text that cannot be part of a secret is let out at once, even in the
// middle of a line: only the last word is held.
func TestStreamLetsOutAtOnce(t *testing.T) {
	r := mustNew(t, Config{})
	tr := r.Transformer()
	if got := string(tr.Transform([]byte("Downloading numpy (18 MB) 45%"))); got != "Downloading numpy (18 MB) " {
		t.Errorf("let out %q", got)
	}
	if got := string(tr.Transform([]byte(" 46%\nok\n"))); got != "45% 46%\nok\n" {
		t.Errorf("let out %q", got)
	}
	// A line with a keyword is held until it ends.
	if got := string(tr.Transform([]byte("export TOKEN=ab"))); got != "" {
		t.Errorf("let out %q of a line with a keyword", got)
	}
	if got := string(tr.Transform([]byte("cdef more\n"))); got != "export TOKEN=[REDACTED:secret_assignment] more\n" {
		t.Errorf("let out %q", got)
	}
}

// A line longer than MaxHold is let out but for its end, a secret in it
// whole; a secret that alone outgrows MaxHold goes out as its marker and
// the rest of it is dropped.
func TestStreamBounds(t *testing.T) {
	r := mustNew(t, Config{MaxHold: 4096})
	tr := r.Transformer()
	long := strings.Repeat("a", 3000) + " token=" + strings.Repeat("b", 1000) + " " + strings.Repeat("c", 3000)
	var out strings.Builder
	for s := long; len(s) > 0; {
		n := min(500, len(s))
		out.Write(tr.Transform([]byte(s[:n])))
		s = s[n:]
	}
	live := out.Len()
	out.Write(tr.Flush())
	want := strings.Repeat("a", 3000) + " token=[REDACTED:secret_assignment] " + strings.Repeat("c", 3000)
	if out.String() != want {
		t.Errorf("long line: got %d bytes, want %d", out.Len(), len(want))
	}
	if live < len(want)-4096 {
		t.Errorf("only %d bytes let out before the end of a %d-byte line", live, len(want))
	}

	// A private key block larger than MaxHold, and with no END line.
	tr = r.Transformer()
	body := strings.Repeat("MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH\n", 100)
	got := streamed(tr, "x\n-----BEGIN PRIVATE KEY-----\n", body[:3000], body[3000:], "-----END PRIVATE KEY-----\nafter\n")
	if j := strings.Join(got, ""); j != "x\n[REDACTED:private_key]\nafter\n" {
		t.Errorf("large key: got %q", j)
	}
	tr = r.Transformer()
	got = streamed(tr, "-----BEGIN PRIVATE KEY-----\n", body, body)
	if j := strings.Join(got, ""); j != "[REDACTED:private_key]" {
		t.Errorf("large key with no end: got %q", j)
	}

	// One token longer than MaxHold.
	tr = r.Transformer()
	tok := "ghp_" + strings.Repeat(githubToken[4:], 170)
	got = streamed(tr, "t "+tok[:3000], tok[3000:], " done\n")
	if j := strings.Join(got, ""); j != "t [REDACTED:github-pat] done\n" {
		t.Errorf("long token: got %q", j)
	}
}

// Block: what came before the secret stays out, the secret and all after
// it on every stream of the command are withheld behind the message.
func TestStreamBlock(t *testing.T) {
	r := mustNew(t, Config{Strategies: map[string]Strategy{"aws-access-token": Block}})
	out := streamed(r.Transformer(), "line 1\n", "id AKIATHJXJ", "QI5OGZ7KOK3 rest\n", "more\n")
	want := []string{"line 1\n", "", "id " + BlockMessage("aws-access-token"), "", ""}
	if strings.Join(out, "|") != strings.Join(want, "|") {
		t.Errorf("pieces %q\nwant %q", out, want)
	}
}
