package redact_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/redact"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

const (
	openAIKey   = "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"
	githubToken = "ghp_8bOfZqfM2oeq3hDavJA76rNicHTp8hkqdlm7"
)

// manager is a real Manager on bwrap, with mw as its chain.
func manager(t *testing.T, mw ...sandbox.Middleware) (*sandbox.Manager, sandbox.Scope) {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	store, err := mongostore.New(context.Background(), mongotest.DB(t), slog.Default())
	if err != nil {
		t.Fatalf("mongostore.New: %v", err)
	}
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	scope := sandbox.Scope{AppID: "app-redact", UserID: "user-1", ChatID: "chat-" + strings.ReplaceAll(t.Name(), "/", "-") + time.Now().Format("150405.000000")}
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	return m, scope
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// live records the chunks a caller receives.
type live struct {
	mu       sync.Mutex
	chunks   []string
	out, err strings.Builder
}

func (l *live) sink(s sandbox.Stream, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chunks = append(l.chunks, string(p))
	if s == sandbox.Stderr {
		l.err.Write(p)
	} else {
		l.out.Write(p)
	}
}

// A secret printed in pieces, with pauses between them so that it reaches
// the caller in several chunks, is redacted in the live output and in the
// final result, which equals the live output; the command itself ran as
// given.
func TestMiddlewareRedactsLiveAndFinal(t *testing.T) {
	r, err := redact.New(redact.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		reported []redact.Finding
	)
	mw := redact.Middleware(func(context.Context, *sandbox.Call) *redact.Redactor { return r },
		redact.WithReport(func(_ context.Context, _ *sandbox.Call, fs []redact.Finding) {
			mu.Lock()
			reported = append(reported, fs...)
			mu.Unlock()
		}))
	m, scope := manager(t, mw)
	half := len(githubToken) / 2
	cmd := "echo " + openAIKey + "; printf 'token " + githubToken[:half] + "'; sleep 0.3; " +
		"printf '" + githubToken[half:] + " done\\n'; printf 'key=" + openAIKey[:10] + "' >&2; sleep 0.3; echo '" + openAIKey[10:] + "' >&2"
	l := &live{}
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: cmd, OnOutput: l.sink})
	if err != nil {
		t.Fatal(err)
	}
	const wantOut = "[REDACTED:openai-api-key]\ntoken [REDACTED:github-pat] done\n"
	const wantErr = "key=[REDACTED:openai-api-key]\n"
	if res.Stdout != wantOut || res.Stderr != wantErr {
		t.Errorf("result stdout %q stderr %q; want %q and %q", res.Stdout, res.Stderr, wantOut, wantErr)
	}
	if l.out.String() != res.Stdout || l.err.String() != res.Stderr {
		t.Errorf("live stdout %q stderr %q differ from the result", l.out.String(), l.err.String())
	}
	if len(l.chunks) < 3 {
		t.Errorf("live chunks %q: the command's pauses should have cut its output", l.chunks)
	}
	for _, c := range l.chunks {
		if strings.Contains(c, "ghp_") || strings.Contains(c, "sk-proj") || strings.Contains(c, githubToken[half:half+8]) {
			t.Errorf("live chunk %q holds part of a secret (all chunks %q)", c, l.chunks)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"openai-api-key": 2, "github-pat": 1}
	got := map[string]int{}
	for _, f := range reported {
		got[f.ID] += f.Count
	}
	if len(got) != len(want) || got["openai-api-key"] != 2 || got["github-pat"] != 1 {
		t.Errorf("reported %+v, want counts %v", reported, want)
	}
}

// The block strategy withholds the output from the secret on, on both
// streams, live and final.
func TestMiddlewareBlock(t *testing.T) {
	r, err := redact.New(redact.Config{Strategies: map[string]redact.Strategy{"private_key": redact.Block}})
	if err != nil {
		t.Fatal(err)
	}
	m, scope := manager(t, redact.Middleware(func(context.Context, *sandbox.Call) *redact.Redactor { return r }))
	cmd := "echo before; printf -- '-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----\\n'; sleep 0.3; echo after; echo err >&2"
	l := &live{}
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: cmd, OnOutput: l.sink})
	if err != nil {
		t.Fatal(err)
	}
	want := "before\n" + redact.BlockMessage("private_key")
	if res.Stdout != want || l.out.String() != want {
		t.Errorf("stdout: result %q, live %q; want %q", res.Stdout, l.out.String(), want)
	}
	if res.Stderr != "" || l.err.String() != "" {
		t.Errorf("stderr after the block: result %q, live %q; want none", res.Stderr, l.err.String())
	}
}

// A long-lived command's conversation with its caller is left alone
// (the caller redacts what it passes on): a block there would hold back
// every later answer.
func TestMiddlewareLongLived(t *testing.T) {
	r, err := redact.New(redact.Config{DefaultStrategy: redact.Block})
	if err != nil {
		t.Fatal(err)
	}
	m, scope := manager(t, redact.Middleware(func(context.Context, *sandbox.Call) *redact.Redactor { return r }))
	in, out := io.Pipe()
	defer in.Close()
	l := &live{}
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "exec cat", Stdin: in, OnOutput: l.sink})
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		done <- res
	}()
	if _, err := io.WriteString(out, "token "+githubToken+"\nthe next answer\n"); err != nil {
		t.Fatal(err)
	}
	out.Close()
	res := <-done
	if want := "token " + githubToken + "\nthe next answer\n"; res.Stdout != want {
		t.Errorf("stdout %q; want the conversation as it was", res.Stdout)
	}
}

// A nil Redactor leaves the call alone.
func TestMiddlewareNilRedactor(t *testing.T) {
	m, scope := manager(t, redact.Middleware(func(context.Context, *sandbox.Call) *redact.Redactor { return nil }))
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "echo " + githubToken})
	if err != nil || res.Stdout != githubToken+"\n" {
		t.Errorf("Exec = %+v, %v; want the output untouched", res, err)
	}
}

// With file redaction on, reads and downloads are redacted (a download's
// size is the redacted size), binary files pass, and archives are refused.
func TestMiddlewareFiles(t *testing.T) {
	r, err := redact.New(redact.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pick := func(context.Context, *sandbox.Call) *redact.Redactor { return r }
	pickFile := func(context.Context, *sandbox.FileCall) *redact.Redactor { return r }
	m, scope := manager(t, redact.Middleware(pick, redact.WithFiles(pickFile, 0)))
	files, err := m.Files(ctx(t), scope, sandbox.Actor{UserID: "user-1", Kind: sandbox.ActorFiles})
	if err != nil {
		t.Fatal(err)
	}
	const text = "GITHUB_TOKEN=" + githubToken + "\nok\n"
	const want = "GITHUB_TOKEN=[REDACTED:github-pat]\nok\n"
	binary := "\x00\x01" + githubToken
	for path, data := range map[string]string{"/workspace/env": text, "/workspace/blob.bin": binary} {
		if err := files.WriteFile(ctx(t), path, []byte(data)); err != nil {
			t.Fatalf("WriteFile %s: %v", path, err)
		}
	}
	if got, err := files.ReadFile(ctx(t), "/workspace/env", 0); err != nil || string(got) != want {
		t.Errorf("ReadFile = %q, %v; want %q", got, err, want)
	}
	rc, info, err := files.Open(ctx(t), "/workspace/env")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != want || info.Size != int64(len(want)) {
		t.Errorf("Open = %q (size %d); want %q (size %d)", got, info.Size, want, len(want))
	}
	if got, err := files.ReadFile(ctx(t), "/workspace/blob.bin", 0); err != nil || string(got) != binary {
		t.Errorf("binary ReadFile = %q, %v; want it unchanged", got, err)
	}
	if err := files.Zip(ctx(t), "/workspace", io.Discard); !errors.Is(err, sandbox.ErrRefused) {
		t.Errorf("Zip error %v, want a refusal", err)
	}
	// The files' own content is untouched: the command sees the secret.
	res, err := m.Exec(ctx(t), scope, sandbox.ExecRequest{Command: "grep -c " + githubToken + " /workspace/env"})
	if err != nil || res.Stdout != "1\n" {
		t.Errorf("grep = %+v, %v", res, err)
	}
}
