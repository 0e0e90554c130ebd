package skills

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Install installs a skill from a ZIP archive of size bytes, or replaces
// the installed version of the skill it holds; by names the installer for
// the version records. The skill's name comes from its front matter. The
// new version goes live in one rename and only once it is complete and
// valid; the previous one is kept (Config.KeepVersions).
func (c *Catalog) Install(ctx context.Context, r io.ReaderAt, size int64, by string) (Skill, error) {
	if size > c.cfg.MaxZipBytes {
		return Skill{}, fmt.Errorf("install skill: %w: the archive is %d bytes, over the limit of %d", ErrTooLarge, size, c.cfg.MaxZipBytes)
	}
	zr, err := zip.NewReader(r, size)
	// ErrInsecurePath comes with a usable reader; plan refuses the
	// entries with its own message.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return Skill{}, fmt.Errorf("install skill: %w: not a readable ZIP archive (%v)", ErrInvalid, err)
	}
	if len(zr.File) > c.cfg.MaxEntries {
		return Skill{}, fmt.Errorf("install skill: %w: the archive has %d entries, over the limit of %d", ErrTooLarge, len(zr.File), c.cfg.MaxEntries)
	}
	p, err := c.plan(zr)
	if err != nil {
		return Skill{}, fmt.Errorf("install skill: %w", err)
	}
	label := p.top
	if label == "" {
		label = "(archive)"
	}
	data, err := readEntry(p.skillMD, c.cfg.MaxFileBytes)
	if err != nil {
		return Skill{}, fmt.Errorf("install skill %s: SKILL.md: %w", label, err)
	}
	fm, _, err := parseSkillMD(label, p.top, data)
	if err != nil {
		return Skill{}, fmt.Errorf("install skill: %w", err)
	}
	name := fm.Name

	staging, err := os.MkdirTemp(c.stagingDir, name+"-")
	if err != nil {
		return Skill{}, fmt.Errorf("install skill %q: create a staging directory: %w", name, err)
	}
	// Until the swap takes it, the staging tree is ours to remove.
	defer func() {
		if staging != "" {
			os.RemoveAll(staging)
		}
	}()
	if err := c.extract(ctx, staging, p.entries); err != nil {
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}
	root, err := os.OpenRoot(staging)
	if err != nil {
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}
	top, err := root.Stat(".")
	if err != nil {
		root.Close()
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}
	s, _, err := c.load(root, name, top)
	root.Close()
	if err != nil {
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}
	if err := finishTree(staging); err != nil {
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}

	unlock, err := c.lock(ctx, name)
	if err != nil {
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}
	defer unlock()
	s, err = c.swap(name, staging, s, by)
	if err != nil {
		return Skill{}, fmt.Errorf("install skill %q: %w", name, err)
	}
	staging = ""
	return s, nil
}

// swap puts the validated tree at staging live, with its record, and
// moves the previous tree to the kept versions. The caller holds the
// skill's lock.
func (c *Catalog) swap(name, staging string, s Skill, by string) (Skill, error) {
	live := filepath.Join(c.liveDir, name)
	m, err := c.readManifest(name)
	if err != nil {
		return Skill{}, err
	}
	before := manifest{Name: name, Versions: append([]versionRecord(nil), m.Versions...)}
	sfi, err := os.Stat(staging)
	if err != nil {
		return Skill{}, err
	}
	newDev, newIno := fileID(sfi)

	old, err := os.Lstat(live)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Skill{}, err
	}
	oldVersion := 0
	if exists {
		if r, ok := m.byID(fileID(old)); ok {
			oldVersion = r.Version
		} else {
			// A tree placed by hand gets a number now, so that it is kept
			// like any other version.
			oldVersion = m.next()
			dev, ino := fileID(old)
			m.Versions = append(m.Versions, versionRecord{Version: oldVersion, InstalledAt: old.ModTime(), Size: treeSize(live), Dev: dev, Ino: ino})
		}
	}
	now := c.cfg.Now().UTC()
	newVersion := m.next()
	m.Versions = append(m.Versions, versionRecord{Version: newVersion, InstalledAt: now, InstalledBy: by, Size: s.Size, Dev: newDev, Ino: newIno})
	// The record goes first: whichever tree a reader finds live, its
	// record is there.
	if err := c.writeManifest(m); err != nil {
		return Skill{}, err
	}
	if exists {
		err = exchange(staging, live)
	} else {
		err = renameNoReplace(staging, live)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%s appeared while the skill was being installed (placed by hand?); install again to replace it: %w", live, err)
		}
	}
	if err != nil {
		if rerr := c.writeManifest(before); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return Skill{}, err
	}
	// From here the install has happened; what fails below costs at most
	// a kept version, and is not reported as a failed install.
	syncDir(c.liveDir)
	if exists {
		// staging now holds the previous tree.
		kept := c.versionDir(name, oldVersion)
		os.RemoveAll(kept) // a leftover of an interrupted install
		if err := os.Rename(staging, kept); err != nil {
			os.RemoveAll(staging)
			m.drop(oldVersion)
		} else {
			syncDir(filepath.Dir(kept))
		}
	}
	c.prune(&m, newVersion)
	c.writeManifest(m)

	s.Version, s.InstalledAt, s.InstalledBy = newVersion, now, by
	return s, nil
}

// prune removes the kept versions beyond KeepVersions, the records of
// versions whose tree is gone, and numbered directories with no record.
func (c *Catalog) prune(m *manifest, live int) {
	sort.Slice(m.Versions, func(i, j int) bool { return m.Versions[i].Version > m.Versions[j].Version })
	var out []versionRecord
	kept := 0
	for _, r := range m.Versions {
		if r.Version == live {
			out = append(out, r)
			continue
		}
		dir := c.versionDir(m.Name, r.Version)
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		if kept < c.cfg.KeepVersions {
			kept++
			out = append(out, r)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			out = append(out, r) // the next install tries again
		}
	}
	m.Versions = out
	recorded := map[string]bool{}
	for _, r := range out {
		recorded[strconv.Itoa(r.Version)] = true
	}
	entries, _ := os.ReadDir(filepath.Join(c.versionsDir, m.Name))
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil && !recorded[e.Name()] {
			os.RemoveAll(filepath.Join(c.versionsDir, m.Name, e.Name()))
		}
	}
}

// Delete removes a skill and its kept versions. The skill disappears from
// R/skills in one rename before its files are removed. name may be any
// directory List reported, valid or not, so that a broken tree placed by
// hand can be removed too.
func (c *Catalog) Delete(ctx context.Context, name string) error {
	if !isEntryName(name) {
		return fmt.Errorf("delete skill %q: %w: give the name of one directory in %s", name, ErrInvalid, c.liveDir)
	}
	unlock, err := c.lock(ctx, name)
	if err != nil {
		return fmt.Errorf("delete skill %q: %w", name, err)
	}
	defer unlock()
	trash, err := os.MkdirTemp(c.stagingDir, "deleted-")
	if err != nil {
		return fmt.Errorf("delete skill %q: %w", name, err)
	}
	defer os.RemoveAll(trash)
	found := true
	if err := os.Rename(filepath.Join(c.liveDir, name), filepath.Join(trash, "tree")); errors.Is(err, fs.ErrNotExist) {
		found = false
	} else if err != nil {
		return fmt.Errorf("delete skill %q: %w", name, err)
	}
	syncDir(c.liveDir)
	versions := filepath.Join(c.versionsDir, name)
	if _, err := os.Lstat(versions); err == nil {
		found = true
		// Renamed first, so that a failure halfway leaves no half
		// manifest behind.
		if err := os.Rename(versions, filepath.Join(trash, "versions")); err != nil {
			return fmt.Errorf("delete skill %q: remove its kept versions: %w", name, err)
		}
	}
	if !found {
		return fmt.Errorf("delete skill %q: %w", name, ErrNotFound)
	}
	return nil
}

// lockRetry bounds the wait between attempts to take another process's
// lock; flock has no blocking form that a context can interrupt.
const (
	lockRetryMin = 5 * time.Millisecond
	lockRetryMax = 200 * time.Millisecond
)

// lock serializes installs and deletions of one skill: a semaphore in the
// process, left when ctx ends, then flock on R/.locks/{name}.lock for
// other processes.
func (c *Catalog) lock(ctx context.Context, name string) (func(), error) {
	c.mu.Lock()
	sem, ok := c.sems[name]
	if !ok {
		sem = make(chan struct{}, 1)
		c.sems[name] = sem
	}
	c.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for another install or deletion of the skill: %w", ctx.Err())
	}
	f, err := os.OpenFile(filepath.Join(c.locksDir, name+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		<-sem
		return nil, fmt.Errorf("lock the skill: %w", err)
	}
	wait := lockRetryMin
	for {
		busy, err := tryLock(f)
		if err != nil {
			f.Close()
			<-sem
			return nil, err
		}
		if !busy {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			f.Close()
			<-sem
			return nil, fmt.Errorf("wait for another process installing or deleting the skill: %w", ctx.Err())
		}
		wait = min(2*wait, lockRetryMax)
	}
	// Closing the file releases the flock.
	return func() { f.Close(); <-sem }, nil
}

// archivePlan is what an archive will unpack to.
type archivePlan struct {
	entries []zipEntry
	// top is the single top-level folder the files are in, or "".
	top     string
	skillMD *zip.File
}

type zipEntry struct {
	f   *zip.File
	rel string // path inside the skill
	dir bool
}

// plan checks every entry's name and declared size before anything is
// written, and finds where SKILL.md is.
func (c *Catalog) plan(zr *zip.Reader) (archivePlan, error) {
	var p archivePlan
	seen := map[string]bool{}
	bad := func(f *zip.File, format string, args ...any) error {
		return fmt.Errorf("%w: entry %q %s", ErrInvalid, f.Name, fmt.Sprintf(format, args...))
	}
	for _, f := range zr.File {
		if strings.IndexByte(f.Name, 0) >= 0 {
			return p, bad(f, "contains a NUL byte")
		}
		// Windows tools write backslashes as separators: read them so,
		// which makes "..\x" the traversal it is meant to be.
		n := strings.ReplaceAll(f.Name, `\`, "/")
		if strings.HasPrefix(n, "/") || len(n) >= 2 && n[1] == ':' && (n[0]|0x20 >= 'a' && n[0]|0x20 <= 'z') {
			return p, bad(f, "is an absolute path; entries must be relative to the archive's root")
		}
		dir := strings.HasSuffix(n, "/")
		n = strings.TrimRight(n, "/")
		for strings.HasPrefix(n, "./") {
			n = n[2:]
		}
		if n == "" || n == "." {
			continue
		}
		segs := strings.Split(n, "/")
		for _, s := range segs {
			switch s {
			case "..":
				return p, bad(f, "climbs out of the archive with \"..\"")
			case "", ".":
				return p, bad(f, "has an empty or \".\" path component")
			}
		}
		if segs[0] == "__MACOSX" || segs[len(segs)-1] == ".DS_Store" {
			continue
		}
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			return p, bad(f, "is a symlink; skills installed from an archive hold only directories and regular files, so copy the file it points to instead")
		case mode.IsDir():
			dir = true
		case !mode.IsRegular():
			return p, bad(f, "is a %s; only directories and regular files are accepted", kind(mode))
		case dir:
			return p, bad(f, "ends with / but is not a directory")
		}
		if seen[n] {
			return p, bad(f, "appears twice")
		}
		seen[n] = true
		p.entries = append(p.entries, zipEntry{f: f, rel: n, dir: dir})
	}

	find := func(rel string) *zip.File {
		for _, e := range p.entries {
			if e.rel == rel && !e.dir {
				return e.f
			}
		}
		return nil
	}
	if p.skillMD = find("SKILL.md"); p.skillMD == nil {
		tops := map[string]bool{}
		for _, e := range p.entries {
			top, _, _ := strings.Cut(e.rel, "/")
			tops[top] = true
		}
		for top := range tops {
			if len(tops) == 1 {
				p.top = top
			}
		}
		if p.top != "" {
			p.skillMD = find(p.top + "/SKILL.md")
		}
		if p.skillMD == nil {
			return p, fmt.Errorf("%w: no SKILL.md at the archive's root or inside one top-level folder (myskill/SKILL.md)", ErrInvalid)
		}
		strip := p.entries[:0]
		for _, e := range p.entries {
			if e.rel == p.top {
				if !e.dir {
					return p, fmt.Errorf("%w: entry %q is both a file and the top-level folder", ErrInvalid, e.f.Name)
				}
				continue
			}
			e.rel = strings.TrimPrefix(e.rel, p.top+"/")
			strip = append(strip, e)
		}
		p.entries = strip
	}

	// Declared sizes refuse an honest large archive before anything is
	// written; extract counts the real bytes for the dishonest ones.
	var total uint64
	for _, e := range p.entries {
		if e.dir {
			continue
		}
		if e.f.UncompressedSize64 > uint64(c.cfg.MaxEntryBytes) {
			return p, fmt.Errorf("%w: entry %q unpacks to %d bytes, over the per-file limit of %d", ErrTooLarge, e.f.Name, e.f.UncompressedSize64, c.cfg.MaxEntryBytes)
		}
		if total += e.f.UncompressedSize64; total > uint64(c.cfg.MaxUnpackedBytes) {
			return p, fmt.Errorf("%w: the archive unpacks to more than %d bytes", ErrTooLarge, c.cfg.MaxUnpackedBytes)
		}
	}
	return p, nil
}

// extract writes the entries under dir, counting the bytes it writes
// against the limits whatever the headers declared.
func (c *Catalog) extract(ctx context.Context, dir string, entries []zipEntry) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var total int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.dir {
			if err := root.MkdirAll(e.rel, 0o755); err != nil {
				return fmt.Errorf("%w: entry %q: %v", ErrInvalid, e.f.Name, err)
			}
			continue
		}
		if d := path.Dir(e.rel); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("%w: entry %q: %v", ErrInvalid, e.f.Name, err)
			}
		}
		n, err := c.extractFile(root, e, c.cfg.MaxUnpackedBytes-total)
		total += n
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Catalog) extractFile(root *os.Root, e zipEntry, budget int64) (int64, error) {
	limit := min(c.cfg.MaxEntryBytes, budget)
	rc, err := e.f.Open()
	if errors.Is(err, zip.ErrAlgorithm) {
		return 0, fmt.Errorf("%w: entry %q uses a compression method other than store or deflate; re-create the archive with a common zip tool", ErrInvalid, e.f.Name)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: entry %q: %v", ErrInvalid, e.f.Name, err)
	}
	defer rc.Close()
	w, err := root.OpenFile(e.rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("%w: entry %q: %v", ErrInvalid, e.f.Name, err)
	}
	defer w.Close()
	n, err := io.Copy(w, io.LimitReader(rc, limit+1))
	switch {
	case err != nil:
		return n, fmt.Errorf("%w: entry %q is corrupt (%v); its data does not match its header", ErrInvalid, e.f.Name, err)
	case n > limit && limit == c.cfg.MaxEntryBytes:
		return n, fmt.Errorf("%w: entry %q unpacks to more than the per-file limit of %d bytes, although its header declares %d", ErrTooLarge, e.f.Name, limit, e.f.UncompressedSize64)
	case n > limit:
		return n, fmt.Errorf("%w: the archive unpacks to more than %d bytes, more than its headers declare", ErrTooLarge, c.cfg.MaxUnpackedBytes)
	}
	// Sandboxes may run as another user than the engine; the mode is set
	// on the open file so that the umask plays no part.
	perm := fs.FileMode(0o644)
	if e.f.Mode()&0o111 != 0 {
		perm = 0o755
	}
	if err := w.Chmod(perm); err != nil {
		return n, err
	}
	if err := w.Sync(); err != nil {
		return n, err
	}
	return n, w.Close()
}

// readEntry reads one archive entry, at most limit bytes.
func readEntry(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: the entry is corrupt (%v)", ErrInvalid, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: it is over the limit of %d bytes; move details to references/", ErrTooLarge, limit)
	}
	return data, nil
}

// finishTree makes the staging tree's directories readable by every user
// and their entries durable before the tree goes live.
func finishTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
		return syncDir(p)
	})
}

// treeSize sums the regular files under dir, for a tree placed by hand.
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
