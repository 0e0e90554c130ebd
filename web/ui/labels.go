package ui

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// The UI's words, one file per language (labels/en.json, zh.json): a
// flat object from key to text, read by the server-rendered pages (t) and
// by the pages' script (T, from the page's I18N), and shaped for any
// front end to import as it is.
//
//go:embed labels/*.json
var labelFS embed.FS

// labels maps a language to its words. A file that cannot be read, or a
// key one language has and another lacks, stops the engine at start: the
// page would show a bare key.
var labels = mustLoadLabels()

func mustLoadLabels() map[string]map[string]string {
	l, err := loadLabels(labelFS, "labels")
	if err != nil {
		panic("web: " + err.Error())
	}
	return l
}

// loadLabels reads the files *.json of dir in fsys.
func loadLabels(fsys fs.FS, dir string) (map[string]map[string]string, error) {
	files, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, f := range files {
		if path.Ext(f.Name()) != ".json" {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, f.Name()))
		if err != nil {
			return nil, err
		}
		words := map[string]string{}
		if err := json.Unmarshal(data, &words); err != nil {
			return nil, fmt.Errorf("labels %s: %w", f.Name(), err)
		}
		out[strings.TrimSuffix(f.Name(), ".json")] = words
	}
	en, ok := out["en"]
	if !ok {
		return nil, fmt.Errorf("labels: no en.json, the language every other falls back to")
	}
	for lang, words := range out {
		for k := range en {
			if _, ok := words[k]; !ok {
				return nil, fmt.Errorf("labels: %q has no text in %s.json", k, lang)
			}
		}
		for k := range words {
			if _, ok := en[k]; !ok {
				return nil, fmt.Errorf("labels: %q of %s.json has no English text in en.json", k, lang)
			}
		}
	}
	return out, nil
}
