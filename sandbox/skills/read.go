package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// treeID identifies a directory across renames.
type treeID struct{ dev, ino uint64 }

// readPatience bounds how long withSkill starts again on a skill that
// keeps being replaced under it. A time, not a count: how many
// replacements a reader meets depends on the machine's load, not on the
// installs alone.
const readPatience = 5 * time.Second

// withSkill validates a live skill and runs fn on it. fn reads further
// files through root, which stays on the tree that was live when it was
// opened even if an install replaces it meanwhile. Only when that tree is
// then removed too (pruned, or the skill deleted) does a read fail; the
// name then resolves to another tree, or to none, and withSkill starts
// again there.
func (c *Catalog) withSkill(name string, fn func(root *os.Root, s Skill, body string) error) error {
	deadline := time.Now().Add(readPatience)
	for {
		id, err := c.tryWithSkill(name, fn)
		if err == nil || id == (treeID{}) || !c.replaced(name, id) || time.Now().After(deadline) {
			return err
		}
	}
}

// replaced reports whether the live tree of name is no longer id.
func (c *Catalog) replaced(name string, id treeID) bool {
	fi, err := os.Lstat(filepath.Join(c.liveDir, name))
	if err != nil {
		return true
	}
	dev, ino := fileID(fi)
	return treeID{dev, ino} != id
}

// tryWithSkill is one attempt of withSkill; it returns the identity of
// the tree it opened, zero if none.
func (c *Catalog) tryWithSkill(name string, fn func(root *os.Root, s Skill, body string) error) (treeID, error) {
	nameErr := checkName(name)
	if nameErr != nil && !isEntryName(name) {
		return treeID{}, fmt.Errorf("skill %q: %w: the name %v", name, ErrInvalid, nameErr)
	}
	dir := filepath.Join(c.liveDir, name)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && nameErr != nil:
		return treeID{}, fmt.Errorf("skill %q: %w: the name %v", name, ErrInvalid, nameErr)
	case errors.Is(err, fs.ErrNotExist):
		return treeID{}, fmt.Errorf("skill %q: %w: it is not installed", name, ErrNotFound)
	case err != nil:
		return treeID{}, fmt.Errorf("skill %q: %w", name, err)
	case !fi.IsDir():
		// A symlink would make the engine and the sandbox resolve it
		// differently.
		return treeID{}, &ValidationError{Skill: name, Field: "directory", Rule: fmt.Sprintf("is a %s, not a directory", kind(fi.Mode()))}
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return treeID{}, fmt.Errorf("skill %q: %w: it is not installed", name, ErrNotFound)
	}
	if err != nil {
		return treeID{}, fmt.Errorf("skill %q: %w", name, err)
	}
	defer root.Close()
	top, err := root.Stat(".")
	if err != nil {
		return treeID{}, fmt.Errorf("skill %q: %w", name, err)
	}
	dev, ino := fileID(top)
	id := treeID{dev, ino}
	// A directory placed by hand under a malformed name is loaded anyway:
	// its SKILL.md says best what is wrong (the name rule, or the
	// mismatch between name and directory).
	s, body, err := c.load(root, name, top)
	if err == nil && nameErr != nil {
		err = &ValidationError{Skill: name, Field: "directory name", Rule: nameErr.Error()}
	}
	if err == nil && s.Version == 0 && c.replaced(name, id) {
		// The tree was replaced and its record pruned while it was
		// read: what was read is of no version; read the live tree.
		err = fmt.Errorf("skill %q: %w: it was replaced while being read; try again", name, ErrNotFound)
	}
	if err != nil {
		return id, err
	}
	return id, fn(root, s, body)
}

// load validates the tree under root as skill name, exactly as for
// List: installs call it on their staging tree before it goes live.
func (c *Catalog) load(root *os.Root, name string, top fs.FileInfo) (Skill, string, error) {
	fi, err := root.Lstat("SKILL.md")
	if errors.Is(err, fs.ErrNotExist) {
		return Skill{}, "", &ValidationError{Skill: name, Field: "SKILL.md", Rule: "is missing; a skill is a directory with SKILL.md at its top"}
	}
	if err != nil {
		return Skill{}, "", fmt.Errorf("skill %q: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return Skill{}, "", &ValidationError{Skill: name, Field: "SKILL.md", Rule: fmt.Sprintf("is a %s; it must be a regular file", kind(fi.Mode()))}
	}
	data, size, err := readRegular(root, "SKILL.md", c.cfg.MaxFileBytes)
	if errors.Is(err, ErrTooLarge) {
		return Skill{}, "", &ValidationError{Skill: name, Field: "SKILL.md", Rule: fmt.Sprintf("is %d bytes, over the limit of %d; move details to references/", size, c.cfg.MaxFileBytes)}
	}
	if err != nil {
		return Skill{}, "", fmt.Errorf("skill %q: %w", name, err)
	}
	fm, body, err := parseSkillMD(name, name, data)
	if err != nil {
		return Skill{}, "", err
	}
	s := Skill{
		Name:          fm.Name,
		Description:   fm.Description,
		License:       fm.License,
		Compatibility: fm.Compatibility,
		Metadata:      fm.Metadata,
	}
	if tools := strings.Fields(fm.AllowedTools); len(tools) > 0 {
		s.AllowedTools = tools
	}
	if s.Files, s.Size, err = c.walk(root, name); err != nil {
		return Skill{}, "", err
	}
	s.InstalledAt = top.ModTime()
	m, err := c.readManifest(name)
	if err != nil {
		return Skill{}, "", err
	}
	if r, ok := m.byID(fileID(top)); ok {
		s.Version, s.InstalledAt, s.InstalledBy = r.Version, r.InstalledAt, r.InstalledBy
	}
	return s, body, nil
}

// walk lists the tree's files without following symlinks.
func (c *Catalog) walk(root *os.Root, name string) ([]string, int64, error) {
	var files []string
	var size int64
	n := 0
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if n++; n > c.cfg.MaxEntries {
			return &ValidationError{Skill: name, Field: "files", Rule: fmt.Sprintf("there are more than %d files and directories", c.cfg.MaxEntries)}
		}
		switch t := d.Type(); {
		case t.IsDir():
		case t&fs.ModeSymlink != 0:
			files = append(files, p)
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			size += fi.Size()
			files = append(files, p)
		default:
			return &ValidationError{Skill: name, Field: "files", Rule: fmt.Sprintf("%s is a %s; a skill holds only directories, regular files and symlinks", p, kind(t))}
		}
		return nil
	})
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("skill %q: list files: %w", name, err)
	}
	sort.Strings(files)
	return files, size, nil
}

// cleanRel checks a path given by a user or the model for a file of a
// skill and returns it cleaned.
func cleanRel(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: the path is empty", ErrInvalidPath)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: the path contains a NUL byte", ErrInvalidPath)
	case strings.Contains(p, `\`):
		return "", fmt.Errorf("%w: %q contains a backslash; separate directories with /", ErrInvalidPath, p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%w: %q is absolute; give the path relative to the skill's directory, like references/guide.md", ErrInvalidPath, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"; only files inside the skill can be named", ErrInvalidPath, p)
		}
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("%w: %q names the skill's directory, not a file", ErrInvalidPath, p)
	}
	return clean, nil
}

// maxLinkHops bounds symlink chains, as the kernel's ELOOP does.
const maxLinkHops = 40

// resolveInside follows symlinks in rel one component at a time and
// returns the path, relative to root, of what rel names. Any link that is
// absolute or climbs above root is refused with the link and its target
// named; os.Root enforces the same again when the file is opened.
func resolveInside(root *os.Root, rel string) (string, error) {
	todo := strings.Split(rel, "/")
	var done []string
	hops := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", fmt.Errorf("%w: it leads above the skill's directory", ErrInvalidPath)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(path.Join(done...), comp)
		fi, err := root.Lstat(cur)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, comp)
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", fmt.Errorf("%w: more than %d symlinks in a row", ErrInvalidPath, maxLinkHops)
		}
		target, err := root.Readlink(cur)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			return "", fmt.Errorf("%w: %s is a symlink to %s, outside the skill; only files inside the skill can be read", ErrInvalidPath, cur, target)
		}
		depth := len(done)
		for _, seg := range strings.Split(target, "/") {
			switch seg {
			case "..":
				if depth--; depth < 0 {
					return "", fmt.Errorf("%w: %s is a symlink to %s, outside the skill; only files inside the skill can be read", ErrInvalidPath, cur, target)
				}
			case "", ".":
			default:
				depth++
			}
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return "", fmt.Errorf("%w: it names the skill's directory, not a file", ErrInvalidPath)
	}
	return path.Join(done...), nil
}

// readRegular reads a regular file through root, at most limit bytes; a
// larger file is ErrTooLarge with its size. FIFOs and devices are refused
// without blocking on them.
func readRegular(root *os.Root, rel string, limit int64) ([]byte, int64, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: %s is a %s, not a regular file", ErrInvalidPath, rel, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fi.Size(), ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) > limit {
		return nil, int64(len(data)), ErrTooLarge
	}
	return data, int64(len(data)), nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}

// isEntryName: name is one directory entry, no path.
func isEntryName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// listFiles renders a file list for an error message, shortened.
func listFiles(files []string) string {
	const show = 20
	if len(files) == 0 {
		return "none"
	}
	if len(files) > show {
		return strings.Join(files[:show], ", ") + fmt.Sprintf(" and %d more", len(files)-show)
	}
	return strings.Join(files, ", ")
}
