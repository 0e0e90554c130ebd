package fastgpt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/fastgpt"
)

// TestRealWorkflows imports every *.json in the directory
// FLOWBOX_FASTGPT_SAMPLES names (FastGPT's template apps, for instance)
// and logs what mapped and what did not. The files are FastGPT's, so they
// are not in the repository; without the variable the test is skipped.
// Every graph must pass Validate; -v shows the report.
func TestRealWorkflows(t *testing.T) {
	dir := os.Getenv("FLOWBOX_FASTGPT_SAMPLES")
	if dir == "" {
		t.Skip("set FLOWBOX_FASTGPT_SAMPLES to a directory of FastGPT workflow JSON files")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.json in %s (%v)", dir, err)
	}
	t.Run("this build's templates", func(t *testing.T) { importAll(t, files, templates(t)) })
	// With the fixture templates of testdata/templates besides: how the
	// same files map once the build has those types.
	t.Run("with the fixture templates", func(t *testing.T) {
		importAll(t, files, withFixtures(t, "classifyQuestion", "ifElseNode", "code", "textEditor", "httpRequest468", "readFiles"))
	})
}

func importAll(t *testing.T, files []string, ts nodes.Templates) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := fastgpt.Import(data, ts)
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if err != nil {
			t.Logf("%s: refused: %v", name, err)
			continue
		}
		if err := ts.Validate(&res.Graph); err != nil {
			t.Errorf("%s: the imported graph is invalid: %v", name, err)
		}
		t.Log(summary(name, res))
	}
}

func summary(name string, res *fastgpt.Result) string {
	var b strings.Builder
	r := res.Report
	types := map[string]int{}
	for _, n := range r.Imported {
		types[n.Type]++
	}
	fmt.Fprintf(&b, "%s: %d nodes imported %v, %d skipped, %d fields, %d problems, %d variables, %d edges\n",
		name, len(r.Imported), sorted(types), len(r.Skipped), len(r.Fields), len(r.Problems), len(res.Graph.Variables), len(res.Graph.Edges))
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "  skipped %s %s %q: %s\n", s.NodeID, s.Type, s.Name, s.Reason)
	}
	for _, f := range r.Fields {
		fmt.Fprintf(&b, "  field %s %s: %s\n", f.NodeID, f.Field, f.Reason)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  problem %s\n", p)
	}
	return b.String()
}

func sorted(m map[string]int) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(out)
	return out
}

func templates(t *testing.T) nodes.Templates {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
