package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flowbox/flowbox/client"
)

// A session is made, a command runs in it, and the session is deleted.
func Example() {
	baseURL, key, stop := startEngine() // a real engine on loopback, for the example
	defer stop()
	ctx := context.Background()

	c := client.New(baseURL, key)
	s, err := c.CreateSession(ctx, client.SessionOptions{Name: "example", Labels: map[string]string{"team": "docs"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.DeleteSession(ctx, s.ID)

	res, err := c.Exec(ctx, s.ID, "echo hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Stdout)
	fmt.Println("exit code:", res.ExitCode)
	// Output:
	// hello
	// exit code: 0
}

// A command's output arrives as it is written, before its result; a
// command that fails is a result, not an error.
func ExampleClient_ExecuteStream() {
	baseURL, key, stop := startEngine()
	defer stop()
	ctx := context.Background()

	c := client.New(baseURL, key)
	s, err := c.CreateSession(ctx, client.SessionOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.DeleteSession(ctx, s.ID)

	// The pieces of output are as the command wrote them, not lines.
	var stdout strings.Builder
	params := map[string]any{"command": "echo step 1; echo step 2; exit 3"}
	res, err := c.ExecuteStream(ctx, s.ID, "shell:exec", params, func(stream, text string) {
		if stream == "stdout" {
			stdout.WriteString(text)
		}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var out client.ShellResult
	if err := res.Decode(&out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(stdout.String())
	fmt.Println("isError:", res.IsError, "exit code:", out.ExitCode)
	// Output:
	// step 1
	// step 2
	// isError: true exit code: 3
}

// The API's errors are checked with errors.Is against the package's
// sentinels.
func ExampleError() {
	baseURL, key, stop := startEngine()
	defer stop()
	ctx := context.Background()

	c := client.New(baseURL, key)
	_, err := c.Session(ctx, "ses_missing")
	fmt.Println(errors.Is(err, client.ErrNotFound))

	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Kind)
	}
	// Output:
	// true
	// 404 not_found
}

// A one-off call runs in a temporary session, deleted after it.
func ExampleClient_ExecuteOnce() {
	baseURL, key, stop := startEngine()
	defer stop()
	ctx := context.Background()

	c := client.New(baseURL, key)
	res, err := c.ExecuteOnce(ctx, "shell:exec", map[string]any{"command": "echo $((6*7))"}, client.SessionOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.TrimSpace(res.Text))
	// Output:
	// 42
}
