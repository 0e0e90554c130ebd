package toolcall

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// probedTools are the programs the prompt may name when a sandbox has them.
var probedTools = []string{"bash", "python3", "pip3", "node", "npm", "git", "curl", "wget", "jq", "sqlite3", "gcc", "make", "perl", "tar", "unzip"}

// Probe finds out what the provider's sandboxes really hold: it creates a
// throwaway sandbox, asks it for its system name and which common tools it
// has, and deletes it. The result feeds the prompt suffix, so the model is
// told the truth about the image in use.
func Probe(ctx context.Context, p sandbox.Provider, network bool) (Environment, error) {
	id := sandbox.IDFor("flowbox-probe", fmt.Sprint(os.Getpid()), fmt.Sprint(time.Now().UnixNano()))
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Network: network, Labels: map[string]string{"purpose": "probe"}}); err != nil {
		return Environment{}, fmt.Errorf("probe the sandbox: %w", err)
	}
	defer p.Delete(context.WithoutCancel(ctx), id)
	script := `if [ -r /etc/os-release ]; then . /etc/os-release; echo "system=$PRETTY_NAME"; fi
for t in ` + strings.Join(probedTools, " ") + `; do command -v "$t" >/dev/null 2>&1 && echo "tool=$t"; done
[ -w /usr ] && echo "writable=/usr"; command -v apt-get >/dev/null 2>&1 && echo "apt=yes"; true`
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: script, Timeout: 30 * time.Second})
	if err != nil {
		return Environment{}, fmt.Errorf("probe the sandbox: %w", err)
	}
	env := Environment{Network: network, Unsafe: p.Capabilities().Unsafe}
	writable, apt := false, false
	for _, line := range strings.Split(res.Stdout, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "system":
			env.System = v
		case "tool":
			env.Tools = append(env.Tools, v)
		case "writable":
			writable = true
		case "apt":
			apt = v == "yes"
		}
	}
	switch {
	case apt && writable:
		env.Install = "apt-get update && apt-get install -y PKG"
		if hasTool(env.Tools, "pip3") {
			env.Install += "; pip3 install PKG"
		}
	case hasTool(env.Tools, "pip3"):
		env.Install = "pip3 install --user PKG (the system itself is read-only)"
	}
	return env, nil
}

func hasTool(tools []string, name string) bool {
	for _, t := range tools {
		if t == name {
			return true
		}
	}
	return false
}
