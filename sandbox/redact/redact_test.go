package redact

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Secrets in the real formats of their providers (random, none is live).
const (
	openAIKey     = "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"
	openAILegacy  = "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"
	anthropicKey  = "sk-ant-api03-dMlHUvTCQCyEZDz-TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLEPH1qhT61qtc4xatws8AA"
	googleKey     = "AIzaphP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jB"
	awsAccessKey  = "AKIATHJXJQI5OGZ7KOK3"
	awsSecretKey  = "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"
	githubToken   = "ghp_8bOfZqfM2oeq3hDavJA76rNicHTp8hkqdlm7"
	githubPAT     = "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"
	gitlabToken   = "glpat-Lf6xuI5aHUQPFeNBTxaQ"
	slackToken    = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	slackHookPath = "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
	stripeKey     = "sk_live_yfErGPmpGXafq0fjzLczbttO"
	stripeTest    = "sk_test_ofL9H2WjQ5TY4MyWuUFjsUNP"
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
		{"openai project", "key " + openAIKey + " ok", "key [REDACTED:openai-api-key] ok", "openai-api-key"},
		{"openai legacy", "OPENAI=" + openAILegacy, "OPENAI=[REDACTED:openai-api-key]", "openai-api-key"},
		{"anthropic", `{"key":"` + anthropicKey + `"}`, `{"key":"[REDACTED:anthropic-api-key]"}`, "anthropic-api-key"},
		{"google", "url?key=" + googleKey + "&q=1", "url?key=[REDACTED:gcp-api-key]&q=1", "gcp-api-key"},
		{"aws access key", "aws_access_key_id = " + awsAccessKey, "aws_access_key_id = [REDACTED:aws-access-token]", "aws-access-token"},
		{"aws session key", "ASIAY34FZKBOKMUTVV7A", "[REDACTED:aws-access-token]", "aws-access-token"},
		{"aws secret key", "aws_secret_access_key = " + awsSecretKey, "aws_secret_access_key = [REDACTED:aws_secret_key]", "aws_secret_key"},
		{"aws secret in json", `"SecretAccessKey": "` + awsSecretKey + `",`, `"SecretAccessKey": "[REDACTED:aws_secret_key]",`, "aws_secret_key"},
		{"github classic", "token " + githubToken, "token [REDACTED:github-pat]", "github-pat"},
		{"github fine-grained", githubPAT + "\n", "[REDACTED:github-fine-grained-pat]\n", "github-fine-grained-pat"},
		{"gitlab", "git clone https://oauth2:" + gitlabToken + "@gitlab.com/x.git", "git clone https://oauth2:[REDACTED:gitlab-pat]@gitlab.com/x.git", "gitlab-pat"},
		{"slack token", "SLACK " + slackToken, "SLACK [REDACTED:slack-bot-token]", "slack-bot-token"},
		{"slack webhook", "curl https://hooks.slack.com/services/" + slackHookPath + " -d x", "curl [REDACTED:slack-webhook-url] -d x", "slack-webhook-url"},
		{"stripe live", "stripe " + stripeKey, "stripe [REDACTED:stripe-access-token]", "stripe-access-token"},
		{"stripe test", "stripe " + stripeTest, "stripe [REDACTED:stripe-access-token]", "stripe-access-token"},
		{"pem block", "$ cat id_rsa\n" + pemKey + "\n$ ls\n", "$ cat id_rsa\n[REDACTED:private_key]\n$ ls\n", "private_key"},
		{"pem without end", "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAQAAADMAAAAL\nnot key text\n", "x\n[REDACTED:private_key]\nnot key text\n", "private_key"},
		{"pem escaped in json", `{"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w==\n-----END PRIVATE KEY-----\n", "x": 1}`, `{"private_key": "[REDACTED:private_key]", "x": 1}`, "private_key"},
		{"jwt", "id_token=" + jwtToken + " exp", "id_token=[REDACTED:jwt] exp", "jwt"},
		{"bearer", "got Bearer abc123def456ghi789 back", "got Bearer [REDACTED:bearer_token] back", "bearer_token"},
		{"authorization header", "> Authorization: Basic dXNlcjpwYXNzd29yZA==\r\n> Host: x", "> Authorization: Basic [REDACTED:authorization_header]\r\n> Host: x", "authorization_header"},
		{"authorization curl", `curl -H "Authorization: token abcdefgh" x`, `curl -H "Authorization: token [REDACTED:curl-auth-header]" x`, "curl-auth-header"},
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
		{"assignment of a known key", "OPENAI_API_KEY=" + openAIKey, "OPENAI_API_KEY=[REDACTED:openai-api-key]", "openai-api-key"},
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
	r := mustNew(t, Config{Disable: []string{"aws-access-token", "secret_assignment"}})
	const in = "AKIAIOSFODNN7EXAMPLE password=hunter22 " + githubToken
	if got, want := must(r.Redact(in)), "AKIAIOSFODNN7EXAMPLE password=hunter22 [REDACTED:github-pat]"; got != want {
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
		{"redact", Config{}, "a [REDACTED:github-pat] b password=[REDACTED:secret_assignment] c"},
		{"mask", Config{DefaultStrategy: Mask}, "a ghp_******** b password=hun******** c"},
		{"mask keep", Config{DefaultStrategy: Mask, MaskKeep: 2}, "a gh******** b password=hu******** c"},
		{"per rule", Config{Strategies: map[string]Strategy{"github-pat": Mask}}, "a ghp_******** b password=[REDACTED:secret_assignment] c"},
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
	y, _ := a.Redact("t ghp_0000000000Zq8bOfZqfM2oeq3hDavJA76rNi")
	z, _ := b.Redact("t " + githubToken)
	mark := strings.TrimPrefix(x1, "t ")
	if !strings.HasPrefix(mark, "[HASH:github-pat:") || len(mark) != len("[HASH:github-pat:]")+8 {
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
	want := []Finding{{ID: "github-pat", Strategy: Redact, Count: 2}, {ID: "aws-access-token", Strategy: Redact, Count: 1}}
	if !reflect.DeepEqual(fs, want) {
		t.Errorf("findings %+v, want %+v", fs, want)
	}
}

// The ids of the detectors gitleaks' rules replaced still work in
// Disable and Strategies, for configurations written before.
func TestLegacyDetectorIDs(t *testing.T) {
	r := mustNew(t, Config{Disable: []string{"github_token"}, Strategies: map[string]Strategy{"openai_key": Mask}})
	in := githubToken + " " + openAIKey
	got, _ := r.Redact(in)
	if want := githubToken + " sk-p********"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Real-looking secrets of many providers, as commands print them, are
// found by gitleaks' rules; what surrounds them stays.
func TestProviderSecrets(t *testing.T) {
	r := mustNew(t, Config{})
	const saKey = `-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----\n`
	tests := []struct{ name, in, secret string }{
		{"aws in env", "AWS_ACCESS_KEY_ID=" + awsAccessKey + "\n", awsAccessKey},
		{"aws in credentials file", "[default]\naws_access_key_id = " + awsAccessKey + "\naws_secret_access_key = " + awsSecretKey + "\n", awsSecretKey},
		{"github in git remote", "origin\thttps://x-access-token:" + githubToken + "@github.com/o/r.git (fetch)", githubToken},
		{"github fine-grained in json", `{"token": "` + githubPAT + `"}`, githubPAT},
		{"slack in curl", `curl -X POST -H 'Content-type: application/json' -d '{"text":"hi"}' https://hooks.slack.com/services/` + slackHookPath, slackHookPath},
		{"stripe in python", `stripe.api_key = "` + stripeKey + `"`, stripeKey},
		{"openai in yaml", "openai:\n  api_key: " + openAIKey + "\n", openAIKey},
		{"openai legacy in text", "using " + openAILegacy + " for now", openAILegacy},
		{"anthropic in env", "ANTHROPIC_API_KEY=" + anthropicKey, anthropicKey},
		{"google in query", "GET /maps/api/geocode/json?address=x&key=" + googleKey + "&sensor=false", googleKey},
		{"gcp service account", `{"type": "service_account", "project_id": "demo-1", "private_key_id": "3f1e9ab2c4d5e6f708192a3b4c5d6e7f8091a2b3", "private_key": "` + saKey + `", "client_email": "bot@demo-1.iam.gserviceaccount.com"}`, "MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC7VJTUt9Us8cKj"},
		{"openssh private key", "$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDUQpXrVz1V5N0hQvTq1dRk7yQGYlBG4H6mTT3mGSKjbQAAAJgWq9DnFqvQ\n-----END OPENSSH PRIVATE KEY-----\n", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"},
		{"jwt in header dump", "< set-cookie: session=" + jwtToken + "; Path=/", jwtToken},
		{"generic high-entropy assignment", `DB_PASSWORD="q7Vz!pR2#mK9xL4w"`, "q7Vz!pR2#mK9xL4w"},
		{"generic api key", `client_secret = "Zk8pQ2vR7nX4wL9tB3mC6yH1"`, "Zk8pQ2vR7nX4wL9tB3mC6yH1"},
		{"literal sk-live assignment", `api_key="sk-live-4f9a8b7c6d5e4f3a2b1c"`, "sk-live-4f9a8b7c6d5e4f3a2b1c"},
		{"npm token", "//registry.npmjs.org/:_authToken=npm_" + "Ab3dEf5hIj7kLm9nOp1qRs3tUv5wXy7zAb3d", "npm_Ab3dEf5hIj7kLm9nOp1qRs3tUv5wXy7zAb3d"},
		{"huggingface token", "HF_TOKEN hf_" + "QmXvTzKpLrNsWdYbCjFgHeAuViOyRtEwQa", "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"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, fs := r.Redact(tc.in)
			if strings.Contains(got, tc.secret) || len(fs) == 0 {
				t.Errorf("Redact(%q)\n got %q (findings %+v); want the secret gone", tc.in, got, fs)
			}
			if !strings.Contains(got, "[REDACTED:") {
				t.Errorf("got %q, want a [REDACTED:...] marker", got)
			}
		})
	}
	if n := len(Detectors()); n < 200 {
		t.Errorf("Detectors() lists %d, want gitleaks' rule set (over 200)", n)
	}
}

// Code that names a secret without holding one is left as it is: reading
// it from the environment, a prompt, a template or an attribute is not a
// literal secret. A literal next to it still goes.
func TestCodeMentioningSecretNamesStays(t *testing.T) {
	r := mustNew(t, Config{})
	for _, in := range []string{
		`api_key=os.environ["X"]`,
		`api_key = os.environ["OPENAI_API_KEY"]`,
		`password = getpass()`,
		`password = getpass.getpass("Password: ")`,
		`token: ${{ secrets.X }}`,
		`  token: ${{ secrets.GITHUB_TOKEN }}`,
		`API_KEY = os.getenv("API_KEY")`,
		`secret_key = settings.SECRET_KEY`,
		`self.password = password`,
		`const token = process.env.TOKEN;`,
		`password=request.form['password']`,
		`token = get_token(user)`,
		`export GITHUB_TOKEN=$GITHUB_TOKEN`,
		`headers = {"Authorization": f"Bearer {token}"}`,
		`if not api_key: raise SystemExit("set OPENAI_API_KEY")`,
		`client = OpenAI(api_key=api_key)`,
		`  password: {{ .Values.db.password }}`,
		`auth_token_expiry_seconds: 3600`,
		`keyboard-interactive authentication succeeded`,
	} {
		if got, fs := r.Redact(in); got != in {
			t.Errorf("Redact(%q)\n got %q (findings %+v); want it unchanged", in, got, fs)
		}
	}
	for in, want := range map[string]string{
		`api_key="sk-live-4f9a8b7c6d5e4f3a2b1c"`:               `api_key="[REDACTED:`,
		`password = "hunter2-Xq9"`:                             `password = `,
		`token: ghs_` + "Ab3dEf5hIj7kLm9nOp1qRs3tUv5wXy7zAb3d": `token: [REDACTED:`,
	} {
		if got, _ := r.Redact(in); !strings.HasPrefix(got, want) || !strings.Contains(got, "[REDACTED:") {
			t.Errorf("Redact(%q) = %q, want it to begin %q", in, got, want)
		}
	}
}
