package ui

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestLabelsLoad: the UI's words load, every key in both languages; a key
// one language lacks, or a broken file, is refused with its name.
func TestLabelsLoad(t *testing.T) {
	if len(labels["en"]) < 300 || len(labels["zh"]) != len(labels["en"]) {
		t.Fatalf("labels: %d English, %d Chinese", len(labels["en"]), len(labels["zh"]))
	}
	if Translate("zh", "send") == Translate("en", "send") || Translate("fr", "send") != Translate("en", "send") {
		t.Errorf("send: zh %q, en %q, fr %q; want Chinese, English, and English for a language there is none of",
			Translate("zh", "send"), Translate("en", "send"), Translate("fr", "send"))
	}
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"a key only in English", fstest.MapFS{"l/en.json": {Data: []byte(`{"a":"A","b":"B"}`)}, "l/zh.json": {Data: []byte(`{"a":"甲"}`)}}, `"b" has no text in zh.json`},
		{"a key only in Chinese", fstest.MapFS{"l/en.json": {Data: []byte(`{"a":"A"}`)}, "l/zh.json": {Data: []byte(`{"a":"甲","c":"丙"}`)}}, `"c" of zh.json has no English text`},
		{"no English", fstest.MapFS{"l/zh.json": {Data: []byte(`{"a":"甲"}`)}}, "no en.json"},
		{"not JSON", fstest.MapFS{"l/en.json": {Data: []byte(`{"a":`)}}, "labels en.json"},
	} {
		if _, err := loadLabels(tc.files, "l"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
