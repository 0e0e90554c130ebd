package redact

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Secrets shaped like the real ones; none is live.
const (
	openAIKey     = "sk-proj-Ab3dEf5hIj7kLm9nOp1qRs3tUv5wXy7zAb3dEf5h"
	openAILegacy  = "sk-4eC39HqLyjWDarjtT1zdp7dc4eC39HqLyjWDarjtT1zdp7dc"
	anthropicKey  = "sk-ant-api03-AbCdEf123456GhIjKl789012MnOpQr-x_y"
	googleKey     = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
	awsAccessKey  = "AKIAIOSFODNN7EXAMPLE"
	awsSecretKey  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	githubToken   = "ghp_1234567890abcdefghijklmnopqrstuvwxYZ"
	githubPAT     = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF"
	gitlabToken   = "glpat-Ab12Cd34Ef56Gh78Ij90"
	slackToken    = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	slackHookPath = "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
	stripeKey     = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	stripeTest    = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
	jwtToken      = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pemKey        = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH\nlWu2/a1gB9JW5TBQ+AVpum9Okx7KfqkfBKL9mcHgSL0yWMdjMfNOqNtrQqKlN4kE\np6RtCTp56TuQlg==\n-----END RSA PRIVATE KEY-----"
	cardNumber    = "4111 1111 1111 1111"
)

func mustNew(t testing.TB, cfg Config) *Redactor {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return r
}

// Every built-in detector finds its secrets where they appear in command
// output, and leaves the rest of the text as it was.
func TestDetectorsFindSecrets(t *testing.T) {
	r := mustNew(t, Config{})
	tests := []struct {
		name, in, want, id string
	}{
		{"openai project", "key " + openAIKey + " ok", "key [REDACTED:openai_key] ok", "openai_key"},
		{"openai legacy", "OPENAI=" + openAILegacy, "OPENAI=[REDACTED:openai_key]", "openai_key"},
		{"anthropic", `{"key":"` + anthropicKey + `"}`, `{"key":"[REDACTED:anthropic_key]"}`, "anthropic_key"},
		{"google", "url?key=" + googleKey + "&q=1", "url?key=[REDACTED:google_api_key]&q=1", "google_api_key"},
		{"aws access key", "aws_access_key_id = " + awsAccessKey, "aws_access_key_id = [REDACTED:aws_access_key]", "aws_access_key"},
		{"aws session key", "ASIAY34FZKBOKMUTVV7A", "[REDACTED:aws_access_key]", "aws_access_key"},
		{"aws secret key", "aws_secret_access_key = " + awsSecretKey, "aws_secret_access_key = [REDACTED:aws_secret_key]", "aws_secret_key"},
		{"aws secret in json", `"SecretAccessKey": "` + awsSecretKey + `",`, `"SecretAccessKey": "[REDACTED:aws_secret_key]",`, "aws_secret_key"},
		{"github classic", "token " + githubToken, "token [REDACTED:github_token]", "github_token"},
		{"github fine-grained", githubPAT + "\n", "[REDACTED:github_token]\n", "github_token"},
		{"gitlab", "git clone https://oauth2:" + gitlabToken + "@gitlab.com/x.git", "git clone https://oauth2:[REDACTED:gitlab_token]@gitlab.com/x.git", "gitlab_token"},
		{"slack token", "SLACK " + slackToken, "SLACK [REDACTED:slack_token]", "slack_token"},
		{"slack webhook", "curl https://hooks.slack.com/services/" + slackHookPath + " -d x", "curl https://hooks.slack.com/services/[REDACTED:slack_webhook] -d x", "slack_webhook"},
		{"stripe live", "stripe " + stripeKey, "stripe [REDACTED:stripe_key]", "stripe_key"},
		{"stripe test", "stripe " + stripeTest, "stripe [REDACTED:stripe_key]", "stripe_key"},
		{"pem block", "$ cat id_rsa\n" + pemKey + "\n$ ls\n", "$ cat id_rsa\n[REDACTED:private_key]\n$ ls\n", "private_key"},
		{"pem without end", "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAQAAADMAAAAL\nnot key text\n", "x\n[REDACTED:private_key]\nnot key text\n", "private_key"},
		{"pem escaped in json", `{"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w==\n-----END PRIVATE KEY-----\n", "x": 1}`, `{"private_key": "[REDACTED:private_key]", "x": 1}`, "private_key"},
		{"jwt", "id_token=" + jwtToken + " exp", "id_token=[REDACTED:jwt] exp", "jwt"},
		{"bearer", "got Bearer abc123def456ghi789 back", "got Bearer [REDACTED:bearer_token] back", "bearer_token"},
		{"authorization header", "> Authorization: Basic dXNlcjpwYXNzd29yZA==\r\n> Host: x", "> Authorization: Basic [REDACTED:authorization_header]\r\n> Host: x", "authorization_header"},
		{"authorization curl", `curl -H "Authorization: token abcdefgh" x`, `curl -H "Authorization: token [REDACTED:authorization_header]" x`, "authorization_header"},
		{"authorization bearer letters", `-H 'authorization: Bearer abcdefghijklmnop'`, `-H 'authorization: Bearer [REDACTED:authorization_header]'`, "authorization_header"},
		{"url password", "DATABASE_URL=postgres://admin:s3cr3tP4ss@db.example.com:5432/app", "DATABASE_URL=postgres://admin:[REDACTED:url_password]@db.example.com:5432/app", "url_password"},
		{"url password with at", "redis://:p@ss@cache:6379", "redis://:[REDACTED:url_password]@cache:6379", "url_password"},
		{"password assignment", "mysql -u root --password=hunter22 db", "mysql -u root --password=[REDACTED:secret_assignment] db", "secret_assignment"},
		{"export token", "export FOO_TOKEN=abc123xyz", "export FOO_TOKEN=[REDACTED:secret_assignment]", "secret_assignment"},
		{"json password", `{"user": "bob", "password": "correct horse"}`, `{"user": "bob", "password": "[REDACTED:secret_assignment]"}`, "secret_assignment"},
		{"yaml secret", "db:\n  password: hunter22\n", "db:\n  password: [REDACTED:secret_assignment]\n", "secret_assignment"},
		{"secret key", "SECRET_KEY='django-insecure-1234'", "SECRET_KEY='[REDACTED:secret_assignment]'", "secret_assignment"},
		{"api key", "api_key=0123abcd&x=1", "api_key=[REDACTED:secret_assignment]&x=1", "secret_assignment"},
		{"api key header", "X-Api-Key: 0123abcd", "X-Api-Key: [REDACTED:secret_assignment]", "secret_assignment"},
		{"assignment of a known key", "OPENAI_API_KEY=" + openAIKey, "OPENAI_API_KEY=[REDACTED:openai_key]", "openai_key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, fs := r.Redact(tc.in)
			if got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if tc.id == "" {
				if len(fs) != 0 {
					t.Errorf("findings %+v, want none", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].ID != tc.id || fs[0].Count != 1 {
				t.Errorf("findings %+v, want one of %s", fs, tc.id)
			}
		})
	}
}

// Ordinary output is left exactly as it is: hashes, ids, base64 that is
// not a secret, prose about secrets.
func TestDetectorsLeaveOrdinaryText(t *testing.T) {
	r := mustNew(t, Config{})
	for _, in := range []string{
		"total 48\ndrwxr-xr-x  5 user staff  160 Jan  2 03:04 .\n-rw-r--r--  1 user staff 1204 Jan  2 03:04 go.mod\n",
		"commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: A <a@b.c>\n",
		"request 123e4567-e89b-12d3-a456-426614174000 done",
		"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"aws s3 cp: etag 3f786850e387550fdab836ed7e6dc881de23001b uploaded",
		"aws cloudformation: c2VjcmV0c2FyZW5vdGhlcmVhdGFsbGp1c3RiYXNlNjQ= done",
		"data: SGVsbG8gd29ybGQhIFRoaXMgaXMgYSB0ZXN0IG9mIGJhc2U2NCB0aGF0IGlzIG5vdCBhIHNlY3JldA==",
		"Collecting numpy\n  Downloading numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.whl (18.0 MB)\nSuccessfully installed numpy-1.26.4\n",
		`{"usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52}, "max_tokens": 100}`,
		"OLDPWD=/home/user\nPWD=/workspace\n",
		"Enter password: \nthe token: it expired yesterday\n",
		"uses bearer authentication and password hashing",
		"if token == expected { return }",
		"task-runner sk-learn risk-assessment-of-the-whole-thing",
		"-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n",
		"-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----\n",
		"https://example.com/path?x=1 git@github.com:foo/bar.git ssh://git@host/repo",
		"password=${DB_PASSWORD} token=$TOKEN secret=<your secret> api_key=null passwd=***",
		"mail me at someone@example.com, card 4111 1111 1111 1111, ts 1700000000000",
		"eyJub3RhIjoiand0In0.eyJhIjoxfQ.c2ln",
		"AKIAIOSFODNN7EXAMPLEEXTRA and xAKIAIOSFODNN7EXAMPLE",
		"ghp_short gho_ glpat-short xoxb-1 sk_live_x AIzaShort",
	} {
		if got, fs := r.Redact(in); got != in || len(fs) != 0 {
			t.Errorf("Redact(%q)\n got %q (findings %+v); want it unchanged", in, got, fs)
		}
	}
}

// Email addresses and card numbers are redacted only when enabled.
func TestOptIns(t *testing.T) {
	const in = "mail someone.else+x@mail.example.com or pay 4111 1111 1111 1111 / 4111-1111-1111-1112 / 5500005555555559"
	if got, _ := mustNew(t, Config{}).Redact(in); got != in {
		t.Errorf("off by default: got %q", got)
	}
	r := mustNew(t, Config{Enable: []string{"email", "credit_card"}})
	got, fs := r.Redact(in)
	const want = "mail [REDACTED:email] or pay [REDACTED:credit_card] / 4111-1111-1111-1112 / [REDACTED:credit_card]"
	if got != want {
		t.Errorf("enabled:\n got %q\nwant %q", got, want)
	}
	wantF := []Finding{{ID: "email", Strategy: Redact, Count: 1}, {ID: "credit_card", Strategy: Redact, Count: 2}}
	if !reflect.DeepEqual(fs, wantF) {
		t.Errorf("findings %+v, want %+v", fs, wantF)
	}
}

func TestDisable(t *testing.T) {
	r := mustNew(t, Config{Disable: []string{"aws_access_key", "secret_assignment"}})
	const in = "AKIAIOSFODNN7EXAMPLE password=hunter22 " + githubToken
	if got, want := must(r.Redact(in)), "AKIAIOSFODNN7EXAMPLE password=hunter22 [REDACTED:github_token]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func must(s string, _ []Finding) string { return s }

func TestStrategies(t *testing.T) {
	in := "a " + githubToken + " b password=hunter2222 c"
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"redact", Config{}, "a [REDACTED:github_token] b password=[REDACTED:secret_assignment] c"},
		{"mask", Config{DefaultStrategy: Mask}, "a ghp_******** b password=hun******** c"},
		{"mask keep", Config{DefaultStrategy: Mask, MaskKeep: 2}, "a gh******** b password=hu******** c"},
		{"per rule", Config{Strategies: map[string]Strategy{"github_token": Mask}}, "a ghp_******** b password=[REDACTED:secret_assignment] c"},
		{"block", Config{Strategies: map[string]Strategy{"secret_assignment": Block}}, BlockMessage("secret_assignment")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := must(mustNew(t, tc.cfg).Redact(in)); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The hash mark is stable for one key and secret, differs between secrets
// and between keys, and never holds the secret.
func TestHashStrategy(t *testing.T) {
	a := mustNew(t, Config{DefaultStrategy: Hash, HashKey: "k1"})
	b := mustNew(t, Config{DefaultStrategy: Hash, HashKey: "k2"})
	x1, _ := a.Redact("t " + githubToken)
	x2, _ := a.Redact("other " + githubToken)
	y, _ := a.Redact("t ghp_0000000000abcdefghijklmnopqrstuvwxYZ")
	z, _ := b.Redact("t " + githubToken)
	mark := strings.TrimPrefix(x1, "t ")
	if !strings.HasPrefix(mark, "[HASH:github_token:") || len(mark) != len("[HASH:github_token:]")+8 {
		t.Fatalf("mark %q", mark)
	}
	if x2 != "other "+mark || y == x1 || z == x1 {
		t.Errorf("same secret %q %q, other secret %q, other key %q", x1, x2, y, z)
	}
	if _, err := New(Config{DefaultStrategy: Hash}); err == nil {
		t.Error("hash without a key was accepted")
	}
}

func TestCustomRules(t *testing.T) {
	r := mustNew(t, Config{Rules: []Rule{
		{ID: "ticket", Pattern: `TCK-[0-9]{6}`},
		{ID: "internal", Pattern: `(?i)corp_secret\s*:\s*(\w+)`, Keywords: []string{"corp_secret"}, Strategy: Mask},
		{ID: "anyline", Pattern: `\bID[0-9]{4}\b`},
	}})
	in := "see TCK-123456 and tck-123456\nCORP_SECRET: topsecret99 ID1234 x\nno ID12345"
	want := "see [REDACTED:ticket] and tck-123456\nCORP_SECRET: top******** [REDACTED:anyline] x\nno ID12345"
	if got := must(r.Redact(in)); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	for _, bad := range []Config{
		{Rules: []Rule{{ID: "x", Pattern: "("}}},
		{Rules: []Rule{{ID: "jwt", Pattern: "x"}}},
		{Rules: []Rule{{ID: "a", Pattern: "x"}, {ID: "a", Pattern: "y"}}},
		{Rules: []Rule{{ID: "bad id!", Pattern: "x"}}},
		{Disable: []string{"nope"}},
		{Enable: []string{"jwt"}},
		{Strategies: map[string]Strategy{"jwt": "erase"}},
		{Strategies: map[string]Strategy{"nope": Mask}},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}

func TestMerge(t *testing.T) {
	op := Config{Strategies: map[string]Strategy{"jwt": Block}, Rules: []Rule{{ID: "op", Pattern: "OPX[0-9]+"}}}
	app := Config{
		Disable:    []string{"jwt"},
		Enable:     []string{"email"},
		Rules:      []Rule{{ID: "app", Pattern: "APX[0-9]+"}},
		Strategies: map[string]Strategy{"app": Mask, "jwt": Redact},
	}
	m := Merge(op, app)
	want := Config{
		Enable:     []string{"email"},
		Rules:      []Rule{{ID: "op", Pattern: "OPX[0-9]+"}, {ID: "app", Pattern: "APX[0-9]+"}},
		Strategies: map[string]Strategy{"jwt": Block, "app": Mask},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Merge = %+v\nwant %+v", m, want)
	}
	// The configuration is JSON-friendly.
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
}

// A finding counts matches and never carries the secret.
func TestFindingsHoldNoSecret(t *testing.T) {
	r := mustNew(t, Config{})
	_, fs := r.Redact(githubToken + " " + githubToken + " " + awsAccessKey)
	want := []Finding{{ID: "github_token", Strategy: Redact, Count: 2}, {ID: "aws_access_key", Strategy: Redact, Count: 1}}
	if !reflect.DeepEqual(fs, want) {
		t.Errorf("findings %+v, want %+v", fs, want)
	}
}
