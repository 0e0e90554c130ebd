package llm

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"run this\n$ ls -la\n$ pwd", []string{"ls -la", "pwd"}},
		{"```bash\necho one\necho two\n```\nand\n```\nuname\n```", []string{"echo one\necho two", "uname"}},
		{"```sh\nfrom fence\n```\n$ ignored when fences exist", []string{"from fence"}},
		{"no commands here, $5 is cheap", nil},
		{"  $   spaced   ", []string{"spaced"}},
	}
	for _, tc := range tests {
		if got := Commands(tc.text); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Commands(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestDemoCallsTheSandbox(t *testing.T) {
	req := Request{Messages: []Message{{Role: RoleSystem, Content: "s"}, {Role: RoleUser, Content: "$ echo hi\n$ false"}}, Tools: []Tool{shellTool}}
	resp, err := Demo{}.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.Message.ToolCalls) != 2 {
		t.Fatalf("response = %+v, want two sandbox_shell calls", resp)
	}
	var args struct{ Command string }
	json.Unmarshal([]byte(resp.Message.ToolCalls[1].Function.Arguments), &args)
	if resp.Message.ToolCalls[1].Function.Name != "sandbox_shell" || args.Command != "false" {
		t.Fatalf("second call = %+v", resp.Message.ToolCalls[1])
	}
	again, _ := Demo{}.Complete(context.Background(), req, nil)
	if !reflect.DeepEqual(resp, again) {
		t.Fatalf("the demo model is not deterministic: %+v then %+v", resp, again)
	}

	history := append(req.Messages, resp.Message,
		Message{Role: RoleTool, ToolCallID: resp.Message.ToolCalls[0].ID, Content: `{"stdout":"hi\n","stderr":"","exitCode":0}`},
		Message{Role: RoleTool, ToolCallID: resp.Message.ToolCalls[1].ID, Content: `{"stdout":"","stderr":"","exitCode":1}`},
	)
	var streamed strings.Builder
	sum, err := Demo{}.Complete(context.Background(), Request{Messages: history, Tools: req.Tools}, func(p string) { streamed.WriteString(p) })
	if err != nil {
		t.Fatal(err)
	}
	want := "`echo hi` succeeded.\n```\nhi\n```\n\n`false` exited with code 1."
	if sum.Message.Content != want || streamed.String() != want {
		t.Fatalf("summary = %q (streamed %q), want %q", sum.Message.Content, streamed.String(), want)
	}
}

func TestDemoWithoutSandbox(t *testing.T) {
	for text, want := range map[string]string{
		"$ ls":  "Enable sandbox (Computer Use)",
		"hello": "offline demo model",
	} {
		resp, err := Demo{}.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: text}}}, nil)
		if err != nil || len(resp.Message.ToolCalls) != 0 || !strings.Contains(resp.Message.Content, want) {
			t.Errorf("%q: %+v, %v; want text containing %q and no tool call", text, resp, err, want)
		}
	}
}
