package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/kubernetes/kubetest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// BenchmarkVsDocker measures the Kubernetes provider beside the Docker
// provider (with its agent), in the same run, on the same busybox image:
//
//	cold       a new sandbox's Ensure and its first command's output
//	exec       a command's round trip in a running sandbox (true)
//	stopstart  Stop, then Ensure and a command's output
//	files      a stopped sandbox's Files and a ReadFile (on Kubernetes,
//	           the start of a files-mode pod)
//
//	go test -run '^$' -bench VsDocker -benchtime 10x ./sandbox/kubernetes/
//
// with a cluster of scripts/kube-up (KUBECONFIG) and a Docker daemon.
func BenchmarkVsDocker(b *testing.B) {
	for _, pv := range []struct {
		name string
		new  func(b *testing.B) sandbox.Provider
	}{
		{"kubernetes", func(b *testing.B) sandbox.Provider { return kubetest.Provider(b, nil) }},
		{"docker", func(b *testing.B) sandbox.Provider {
			return dockertest.Provider(b, docker.Config{AgentBinary: dockertest.AgentBinary(b)})
		}},
	} {
		b.Run(pv.name+"/cold", func(b *testing.B) {
			p := pv.new(b)
			for i := 0; i < b.N; i++ {
				id := sandboxtest.NewID(b)
				ensureAndEcho(b, p, id)
				b.StopTimer()
				if err := p.Delete(context.Background(), id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		b.Run(pv.name+"/exec", func(b *testing.B) {
			p := pv.new(b)
			id := sandboxtest.NewID(b)
			ensureAndEcho(b, p, id)
			b.Cleanup(func() { _ = p.Delete(context.Background(), id) })
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if res, err := p.Exec(context.Background(), id, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil || res.ExitCode != 0 {
					b.Fatalf("Exec: %+v, %v", res, err)
				}
			}
		})
		b.Run(pv.name+"/stopstart", func(b *testing.B) {
			p := pv.new(b)
			id := sandboxtest.NewID(b)
			ensureAndEcho(b, p, id)
			b.Cleanup(func() { _ = p.Delete(context.Background(), id) })
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.Stop(context.Background(), id); err != nil {
					b.Fatal(err)
				}
				ensureAndEcho(b, p, id)
			}
		})
		b.Run(pv.name+"/files", func(b *testing.B) {
			p := pv.new(b)
			id := sandboxtest.NewID(b)
			ensureAndEcho(b, p, id)
			b.Cleanup(func() { _ = p.Delete(context.Background(), id) })
			ctx := context.Background()
			if _, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "echo kept > f", Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := p.Stop(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				files, err := p.Files(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				if data, err := files.ReadFile(ctx, "f", 100); err != nil || string(data) != "kept\n" {
					b.Fatalf("ReadFile: %q, %v", data, err)
				}
			}
		})
	}
}

// ensureAndEcho ensures the sandbox and runs a command that prints.
func ensureAndEcho(b *testing.B, p sandbox.Provider, id string) {
	b.Helper()
	ctx := context.Background()
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		b.Fatalf("Ensure: %v", err)
	}
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "echo up", Timeout: 30 * time.Second})
	if err != nil || res.Stdout != "up\n" {
		b.Fatalf("first command: %+v, %v", res, err)
	}
}
