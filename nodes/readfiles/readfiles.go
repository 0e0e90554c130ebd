// Package readfiles is the read-files node (type "readFiles", FastGPT's):
// it gives the text of the files the chat's user uploaded, for the nodes
// after it (a model's prompt, a code node). It reads the chat's uploads
// on the engine's host, where the workspace store keeps them
// (/workspace/uploads in the chat's sandbox), so it needs no sandbox and
// starts none.
//
// Text-like files are read, up to a bound on the node's whole text;
// other files are named with the reason they were skipped. This package
// must never read outside the chat's uploads (the workspace store
// confines every path, links included), never hold more than the bound
// of any file in memory, and never read another chat's files.
package readfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// Type is the node type's name, FastGPT's.
const Type = "readFiles"

// Uploads are the chats' uploaded files (*workspace.Store).
type Uploads interface {
	List(ctx context.Context, scope sandbox.Scope, area workspace.Area, dir string) ([]workspace.Entry, error)
	Open(ctx context.Context, scope sandbox.Scope, area workspace.Area, p string) (*os.File, fs.FileInfo, error)
}

// Defaults of Config.
const (
	DefaultMaxFiles     = 20
	DefaultMaxTextBytes = 512 << 10
	// maxEntries and maxDepth bound the walk of a chat's uploads.
	maxEntries = 2000
	maxDepth   = 8
)

// Config configures the node type. Zero values take the defaults.
type Config struct {
	// Uploads are the chats' files; nil: every chat has none.
	Uploads Uploads
	// MaxFiles bounds the files one node reads (FastGPT's maxFiles);
	// the others are named as skipped.
	MaxFiles int
	// MaxTextBytes bounds the text of all files together; a file that
	// does not fit is cut, the files after it skipped.
	MaxTextBytes int64
}

// Node is the read-files node type.
type Node struct{ cfg Config }

var _ nodes.NodeType = (*Node)(nil)

// New returns the node type.
func New(cfg Config) *Node {
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	if cfg.MaxTextBytes <= 0 {
		cfg.MaxTextBytes = DefaultMaxTextBytes
	}
	return &Node{cfg: cfg}
}

// File is one file the node looked at: rawResponse's items.
type File struct {
	// Filename is the path in the chat's uploads ("reports/q1.csv").
	Filename string `json:"filename"`
	// Path is where the chat's sandbox sees it.
	Path string `json:"path"`
	Size int64  `json:"size"`
	Text string `json:"text,omitempty"`
	// Truncated: only the first part of the file fits the node's bound.
	Truncated bool `json:"truncated,omitempty"`
	// Skipped says why the file was not read.
	Skipped string `json:"skipped,omitempty"`
}

// Run reads the chat's uploads (those fileUrlList names, or all) and
// gives their text as system_text, FastGPT's format, and every file's
// record as rawResponse.
func (n *Node) Run(ctx context.Context, run *nodes.NodeRun) (map[string]any, error) {
	c := run.Chat
	scope := sandbox.Scope{AppID: c.AppID, UserID: c.UserID, ChatID: c.ChatID}
	var entries []workspace.Entry
	if n.cfg.Uploads != nil && c.AppID != "" && c.UserID != "" && c.ChatID != "" {
		var err error
		if entries, err = n.walk(ctx, scope); err != nil {
			return nil, err
		}
	}
	files := n.choose(entries, nodes.StringsInput(run.Inputs, "fileUrlList"))
	left := n.cfg.MaxTextBytes
	read := 0
	for i := range files {
		f := &files[i]
		switch {
		case f.Skipped != "":
		case read >= n.cfg.MaxFiles:
			f.Skipped = fmt.Sprintf("the node reads at most %d files", n.cfg.MaxFiles)
		case left <= 0:
			f.Skipped = fmt.Sprintf("the node's text limit of %s is reached", workspace.HumanSize(n.cfg.MaxTextBytes))
		default:
			if err := n.read(ctx, scope, f, left); err != nil {
				return nil, err
			}
			if f.Skipped == "" {
				read++
				left -= int64(len(f.Text))
			}
		}
	}
	run.Detail = files
	parts := make([]string, len(files))
	for i, f := range files {
		name := displayName(f.Filename)
		switch {
		case f.Skipped != "":
			parts[i] = fmt.Sprintf("File: %s\n<Skipped>%s</Skipped>", name, f.Skipped)
		case f.Truncated:
			parts[i] = fmt.Sprintf("File: %s\n<Content>\n%s\n</Content>\n(only the first %d of %d bytes)", name, f.Text, len(f.Text), f.Size)
		default:
			parts[i] = fmt.Sprintf("File: %s\n<Content>\n%s\n</Content>", name, f.Text)
		}
	}
	// Outputs hold JSON values, as every node's do.
	var raw []any
	b, err := json.Marshal(files)
	if err == nil {
		err = json.Unmarshal(b, &raw)
	}
	if err != nil {
		return nil, fmt.Errorf("record the files read: %w", err)
	}
	if raw == nil {
		raw = []any{}
	}
	return map[string]any{"system_text": strings.Join(parts, "\n******\n"), "rawResponse": raw}, nil
}

// walk lists the chat's uploaded files, depth-first in name order, within
// the walk's bounds.
func (n *Node) walk(ctx context.Context, scope sandbox.Scope) ([]workspace.Entry, error) {
	var out []workspace.Entry
	seen := 0
	var dir func(rel string, depth int) error
	dir = func(rel string, depth int) error {
		entries, err := n.cfg.Uploads.List(ctx, scope, workspace.Uploads, rel)
		if errors.Is(err, sandbox.ErrNotFound) && rel == "" {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list the chat's uploaded files: %w", err)
		}
		for _, e := range entries {
			if seen++; seen > maxEntries {
				return nil
			}
			switch {
			case e.IsDir && !e.Link:
				if depth < maxDepth {
					if err := dir(e.Path, depth+1); err != nil {
						return err
					}
				}
			case !e.IsDir:
				out = append(out, e)
			}
		}
		return nil
	}
	if err := dir("", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// choose is the files the node reads: those names names (a file's name,
// its path in the uploads or in the sandbox), in that order, or every
// upload when it names none. A name no upload has is a skipped file.
func (n *Node) choose(entries []workspace.Entry, names []string) []File {
	file := func(e workspace.Entry) File {
		return File{Filename: e.Path, Path: e.SandboxPath, Size: e.Size}
	}
	var out []File
	if len(names) == 0 {
		for _, e := range entries {
			out = append(out, file(e))
		}
		return out
	}
	for _, name := range names {
		name = strings.TrimSpace(name)
		found := false
		for _, e := range entries {
			if e.Name == name || e.Path == name || e.SandboxPath == name || e.Path == strings.TrimPrefix(path.Clean("/"+name), "/") {
				out, found = append(out, file(e)), true
				break
			}
		}
		if !found {
			out = append(out, File{Filename: name, Skipped: "no file of that name is uploaded to this chat"})
		}
	}
	return out
}

// read reads f's text, at most limit bytes, or says why it is skipped.
// Only the sandbox's own failures (not a file's) are errors.
func (n *Node) read(ctx context.Context, scope sandbox.Scope, f *File, limit int64) error {
	fh, fi, err := n.cfg.Uploads.Open(ctx, scope, workspace.Uploads, f.Filename)
	switch {
	case errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrInvalidPath):
		f.Skipped = "it cannot be read: " + err.Error()
		return nil
	case err != nil:
		return fmt.Errorf("read the uploaded file %s: %w", f.Filename, err)
	}
	defer fh.Close()
	f.Size = fi.Size()
	data, err := io.ReadAll(io.LimitReader(fh, limit))
	if err != nil {
		return fmt.Errorf("read the uploaded file %s: %w", f.Filename, err)
	}
	cut := int64(len(data)) == limit && f.Size > limit
	if why := notText(f.Filename, data, cut); why != "" {
		f.Skipped = why
		return nil
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if cut {
		// A character cut in two at the bound is left out.
		for len(data) > 0 && !utf8.Valid(data) {
			data = data[:len(data)-1]
		}
	}
	f.Text, f.Truncated = string(data), cut
	return nil
}

// documents are kinds of files people upload that hold text this node
// cannot extract.
var documents = map[string]string{
	".pdf": "a PDF", ".doc": "a Word document", ".docx": "a Word document", ".xls": "an Excel workbook",
	".xlsx": "an Excel workbook", ".ppt": "a PowerPoint deck", ".pptx": "a PowerPoint deck", ".odt": "an OpenDocument text",
}

// notText says why data (the head of a file) is not text, "" when it is:
// valid UTF-8 (a character cut at the end of a partial read excepted),
// no NUL bytes, no UTF-16.
func notText(name string, data []byte, partial bool) string {
	if kind, ok := documents[strings.ToLower(path.Ext(name))]; ok {
		return kind + ", not a text file: this node reads text files only; convert it to text first (for example in the sandbox, with a tool-call node)"
	}
	head := data[:min(len(data), 8192)]
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return "UTF-16 text: this node reads UTF-8; save the file as UTF-8"
	case bytes.IndexByte(head, 0) >= 0:
		return fmt.Sprintf("not a text file (%s)", contentType(head))
	}
	check := data
	if partial {
		for i := 0; i < utf8.UTFMax && len(check) > 0 && !utf8.Valid(check); i++ {
			check = check[:len(check)-1]
		}
	}
	if !utf8.Valid(check) {
		return fmt.Sprintf("not UTF-8 text (%s): this node reads UTF-8 text files only", contentType(head))
	}
	return ""
}

func contentType(head []byte) string {
	t, _, _ := strings.Cut(http.DetectContentType(head), ";")
	return t
}

// displayName is a file's name as the text shows it: quoted with escapes
// when it holds characters that could disguise it or break the layout.
func displayName(name string) string {
	for _, r := range name {
		if !unicode.IsPrint(r) || r == '<' || r == '>' {
			return strconv.Quote(name)
		}
	}
	return name
}
