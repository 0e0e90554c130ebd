// Package skills holds this repository's example skills, embedded in the
// engine so that the Skills admin page offers to install them wherever
// the engine runs. It never installs anything itself.
package skills

import (
	"embed"
	"fmt"
	"io/fs"

	catalog "github.com/flowbox/flowbox/sandbox/skills"
)

//go:embed csv-analyzer markdown-report
var examples embed.FS

// Example is one example skill as SKILL.md describes it.
type Example struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Examples lists the example skills, by name.
func Examples() ([]Example, error) {
	entries, err := fs.ReadDir(examples, ".")
	if err != nil {
		return nil, err
	}
	out := make([]Example, 0, len(entries))
	for _, e := range entries {
		data, err := fs.ReadFile(examples, e.Name()+"/SKILL.md")
		if err != nil {
			return nil, fmt.Errorf("example skill %s: %w", e.Name(), err)
		}
		name, description, err := catalog.Describe(data)
		if err != nil {
			return nil, fmt.Errorf("example skill %s: %w", e.Name(), err)
		}
		out = append(out, Example{Name: name, Description: description})
	}
	return out, nil
}

// Zip returns the example skill name as the ZIP archive an admin would
// upload; fs.ErrNotExist when there is no such example.
func Zip(name string) ([]byte, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, fmt.Errorf("example skill %q: %w", name, fs.ErrNotExist)
	}
	if _, err := fs.Stat(examples, name+"/SKILL.md"); err != nil {
		return nil, fmt.Errorf("example skill %q: %w", name, fs.ErrNotExist)
	}
	return catalog.ZipFS(examples, name)
}
