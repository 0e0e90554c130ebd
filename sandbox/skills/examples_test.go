package skills_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/skills"
)

// examplesDir holds the skills shipped with the product.
const examplesDir = "../../skills"

// installExamples installs every shipped skill from a ZIP of its
// directory, as an admin would upload it.
func installExamples(t *testing.T, c *skills.Catalog) {
	t.Helper()
	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue // the Go file that embeds them
		}
		data, err := skills.ZipDir(filepath.Join(examplesDir, e.Name()))
		if err != nil {
			t.Fatalf("zip %s: %v", e.Name(), err)
		}
		if s, err := install(c, data, "admin"); err != nil || s.Name != e.Name() {
			t.Fatalf("install %s: %+v, %v", e.Name(), s, err)
		}
	}
}

func TestExampleSkillsAreValid(t *testing.T) {
	c := newCatalog(t, skills.Config{})
	installExamples(t, c)
	list, invalid, err := c.List(context.Background())
	if err != nil || len(invalid) != 0 {
		t.Fatalf("List: invalid %+v, %v", invalid, err)
	}
	want := map[string][]string{
		"csv-analyzer":    {"SKILL.md", "references/output-format.md", "scripts/analyze.py"},
		"markdown-report": {"SKILL.md", "scripts/render.py"},
	}
	if len(list) != len(want) {
		t.Errorf("List = %d skills, want %d", len(list), len(want))
	}
	for _, s := range list {
		if !reflect.DeepEqual(s.Files, want[s.Name]) {
			t.Errorf("%s: Files = %v, want %v", s.Name, s.Files, want[s.Name])
		}
		if s.Description == "" || s.License != "Apache-2.0" || s.Metadata["author"] != "flowbox" {
			t.Errorf("%s: front matter read as %+v", s.Name, s)
		}
	}
	if _, err := c.ReadResource(context.Background(), "csv-analyzer", "references/output-format.md"); err != nil {
		t.Errorf("ReadResource: %v", err)
	}
}

// runScript runs a skill's script the way a sandbox would, with the argv
// ScriptArgv gives, the sandbox's /workspace/skills being the catalog's
// directory on this machine, in dir (the chat's intermediate directory).
func runScript(t *testing.T, c *skills.Catalog, dir, skill, script string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	argv, err := c.ScriptArgv(context.Background(), skill, script, args)
	if err != nil {
		t.Fatalf("ScriptArgv: %v", err)
	}
	for i, a := range argv {
		if strings.HasPrefix(a, skills.MountDir+"/") {
			argv[i] = c.Dir() + strings.TrimPrefix(a, skills.MountDir)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", argv, err)
	}
	return out.String(), errOut.String(), 0
}

func TestExampleScripts(t *testing.T) {
	_, err := exec.LookPath("python3")
	testenv.Need(t, "python3", err)
	c := newCatalog(t, skills.Config{})
	installExamples(t, c)
	work := t.TempDir()
	csvPath := filepath.Join(work, "sales.csv")
	writeTree(t, work, map[string]string{"sales.csv": "\ufeffregion,amount,qty,note\n" +
		"north,10,1,first\n" +
		"south,30.5,2,\n" +
		"\n" +
		"north,-4,,\"with, comma\"\n" +
		"east,1e3,7,x,extra\n"})

	summaryPath := filepath.Join(work, "summary.json")
	stdout, stderr, code := runScript(t, c, work, "csv-analyzer", "analyze.py", csvPath, "--output", summaryPath)
	if code != 0 || !strings.Contains(stdout, "wrote json summary of 4 rows") {
		t.Fatalf("analyze.py: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	var summary struct {
		Rows       int `json:"rows"`
		RaggedRows int `json:"ragged_rows"`
		Columns    []struct {
			Name     string  `json:"name"`
			Type     string  `json:"type"`
			NonEmpty int     `json:"non_empty"`
			Min      float64 `json:"min"`
			Max      float64 `json:"max"`
			Mean     float64 `json:"mean"`
			Distinct int     `json:"distinct"`
		} `json:"columns"`
	}
	data, err := os.ReadFile(summaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &summary); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, data)
	}
	if summary.Rows != 4 || summary.RaggedRows != 1 || len(summary.Columns) != 4 {
		t.Fatalf("summary = %+v, want 4 rows, 1 ragged, 4 columns", summary)
	}
	amount, qty, region, note := summary.Columns[1], summary.Columns[2], summary.Columns[0], summary.Columns[3]
	if amount.Name != "amount" || amount.Type != "numeric" || amount.Min != -4 || amount.Max != 1000 || amount.Mean != (10+30.5-4+1000)/4.0 {
		t.Errorf("amount = %+v, want numeric -4..1000 mean 259.125", amount)
	}
	if qty.Type != "numeric" || qty.NonEmpty != 3 || qty.Mean != 10/3.0 {
		t.Errorf("qty = %+v, want numeric with 3 values, mean 10/3", qty)
	}
	if region.Type != "text" || region.Distinct != 3 || note.Type != "text" || note.NonEmpty != 3 {
		t.Errorf("region = %+v, note = %+v", region, note)
	}

	// Markdown straight to stdout.
	stdout, stderr, code = runScript(t, c, work, "csv-analyzer", "scripts/analyze.py", csvPath, "--format", "markdown")
	if code != 0 || !strings.Contains(stdout, "# Summary of sales.csv") || !strings.Contains(stdout, "| amount | numeric | 4 | -4 | 1000 | 259.125 |") {
		t.Errorf("analyze.py --format markdown: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}

	reportPath := filepath.Join(work, "report.md")
	stdout, stderr, code = runScript(t, c, work, "markdown-report", "render.py", summaryPath, "--output", reportPath, "--title", "Sales | 2024")
	if code != 0 {
		t.Fatalf("render.py: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	report, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Sales | 2024\n",
		"- Rows: 4\n",
		"- Columns: 4 (2 numeric, 2 text)\n",
		"- Rows whose number of fields differs from the header: 1\n",
		"| amount | -4 | 1,000 | 259.125 |\n",
		"| region | 3 | north (2), south (1), east (1) |\n",
	} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}

	// Errors say what is wrong and exit 1.
	errCases := []struct {
		skill, script string
		args          []string
		wantStderr    string
	}{
		{"csv-analyzer", "analyze.py", []string{filepath.Join(work, "missing.csv")}, "no such file"},
		{"markdown-report", "render.py", []string{csvPath}, "cannot read"},
		{"markdown-report", "render.py", []string{writeJSON(t, work, `{"rows": 1}`)}, "has no field 'columns'"},
		{"markdown-report", "render.py", []string{writeJSON(t, work, `{"rows": 1, "columns": [{"name": "a", "type": "numeric"}]}`)}, "has no field 'min'"},
	}
	for _, tt := range errCases {
		_, stderr, code := runScript(t, c, work, tt.skill, tt.script, tt.args...)
		if code != 1 || !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("%s %v: exit %d, stderr %q; want 1 and %q", tt.script, tt.args, code, stderr, tt.wantStderr)
		}
	}
}

func writeJSON(t *testing.T, dir, body string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
