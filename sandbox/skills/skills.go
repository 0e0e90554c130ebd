package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// MountDir is where every sandbox sees Dir, read-only; it equals
// sandbox.SkillsDir.
const MountDir = "/workspace/skills"

// Errors, checked with errors.Is.
var (
	// ErrNotFound: no such skill, resource or script.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a skill breaks the format (see ValidationError), a skill
	// name is malformed, or an archive cannot be installed as it is.
	ErrInvalid = errors.New("invalid skill")
	// ErrInvalidPath: a resource or script path is absolute, climbs out
	// with "..", or leads outside its skill through a symlink.
	ErrInvalidPath = errors.New("invalid path")
	// ErrTooLarge: an archive or a file is over a configured limit.
	ErrTooLarge = errors.New("too large")
)

// Config configures a Catalog. Zero values take the documented defaults.
type Config struct {
	// Root is the directory the catalog owns (R in the package comment).
	// Required.
	Root string
	// MaxZipBytes bounds an archive's size; default 32 MiB.
	MaxZipBytes int64
	// MaxEntries bounds an archive's entries and a skill's files and
	// directories; default 1000.
	MaxEntries int
	// MaxUnpackedBytes bounds the bytes an archive unpacks to; default
	// 128 MiB.
	MaxUnpackedBytes int64
	// MaxEntryBytes bounds the bytes one archive entry unpacks to;
	// default 32 MiB.
	MaxEntryBytes int64
	// MaxFileBytes bounds what ReadResource returns and the size of
	// SKILL.md; default 256 KiB. Larger files stay usable by scripts in
	// the sandbox.
	MaxFileBytes int64
	// KeepVersions is how many previous versions of a skill are kept
	// besides the live one; default 3, negative keeps none.
	KeepVersions int
	// Now gives install times; default time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultMaxZipBytes      = 32 << 20
	DefaultMaxEntries       = 1000
	DefaultMaxUnpackedBytes = 128 << 20
	DefaultMaxEntryBytes    = 32 << 20
	DefaultMaxFileBytes     = 256 << 10
	DefaultKeepVersions     = 3
)

// Skill is an installed, valid skill.
type Skill struct {
	Name          string
	Description   string
	License       string
	Compatibility string
	Metadata      map[string]string
	// AllowedTools is the front matter's space-separated allowed-tools.
	AllowedTools []string
	// Version counts the skill's installs from 1; 0 for a tree placed in
	// R/skills by hand.
	Version int
	// Files are the skill's regular files and symlinks, relative to its
	// directory, with "/" separators, sorted; SKILL.md included.
	Files []string
	// Size is the total size of the regular files in bytes.
	Size int64
	// InstalledAt is when the version was installed (for a tree placed by
	// hand, its directory's modification time); InstalledBy who
	// installed it, empty when unknown.
	InstalledAt time.Time
	InstalledBy string
}

// SandboxDir is the skill's directory as seen inside a sandbox.
func (s Skill) SandboxDir() string { return MountDir + "/" + s.Name }

func (s Skill) has(rel string) bool {
	i := sort.SearchStrings(s.Files, rel)
	return i < len(s.Files) && s.Files[i] == rel
}

// Invalid is a directory in R/skills that is not a valid skill.
type Invalid struct {
	// Dir is the directory's name in R/skills.
	Dir string
	// Reason says which rule it breaks.
	Reason string
}

// Summary is what an agent first learns of a skill (progressive
// disclosure): its name and when to use it.
type Summary struct {
	Name        string
	Description string
}

// Version is one version of a skill that is live or kept.
type Version struct {
	Number      int
	InstalledAt time.Time
	InstalledBy string
	Size        int64
	// Current: this version is the live one.
	Current bool
}

// Catalog is the skills directory on disk. Its methods are safe for
// concurrent use, also by several processes sharing Root.
type Catalog struct {
	cfg         Config
	liveDir     string
	versionsDir string
	stagingDir  string
	locksDir    string

	mu   sync.Mutex
	sems map[string]chan struct{}
}

// stagingMaxAge is the age after which New removes what an interrupted
// install or deletion left in R/.staging; no install takes that long.
const stagingMaxAge = time.Hour

// New opens the catalog under cfg.Root, creating its directories. It
// fails when the filesystem cannot replace skills atomically.
func New(cfg Config) (*Catalog, error) {
	if cfg.Root == "" {
		return nil, errors.New("skills: Config.Root is empty; give the directory that holds the skills")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("skills: root %s: %w", cfg.Root, err)
	}
	cfg.Root = root
	if cfg.MaxZipBytes <= 0 {
		cfg.MaxZipBytes = DefaultMaxZipBytes
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxUnpackedBytes <= 0 {
		cfg.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if cfg.MaxEntryBytes <= 0 {
		cfg.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	switch {
	case cfg.KeepVersions == 0:
		cfg.KeepVersions = DefaultKeepVersions
	case cfg.KeepVersions < 0:
		cfg.KeepVersions = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Catalog{
		cfg:         cfg,
		liveDir:     filepath.Join(root, "skills"),
		versionsDir: filepath.Join(root, "skill-versions"),
		stagingDir:  filepath.Join(root, ".staging"),
		locksDir:    filepath.Join(root, ".locks"),
		sems:        map[string]chan struct{}{},
	}
	for _, d := range []string{c.liveDir, c.versionsDir, c.stagingDir, c.locksDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("skills: create %s: %w", d, err)
		}
	}
	// The live directory is mounted into sandboxes that may run as
	// another user: it must be readable whatever the umask.
	if err := os.Chmod(c.liveDir, 0o755); err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	if err := c.checkFilesystem(); err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	c.removeStale()
	return c, nil
}

// checkFilesystem says at start, rather than at the first install, that
// R cannot swap trees atomically: R/skills, R/skill-versions and
// R/.staging must be on one filesystem that supports renameat2.
func (c *Catalog) checkFilesystem() error {
	live, err := os.Stat(c.liveDir)
	if err != nil {
		return err
	}
	liveDev, _ := fileID(live)
	for _, d := range []string{c.versionsDir, c.stagingDir} {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if dev, _ := fileID(fi); dev != liveDev {
			return fmt.Errorf("%s and %s are on different filesystems; skills are moved between them by rename, so keep all of %s on one filesystem", c.liveDir, d, c.cfg.Root)
		}
	}
	a, err := os.MkdirTemp(c.stagingDir, "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(a)
	b, err := os.MkdirTemp(c.stagingDir, "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(b)
	if err := exchange(a, b); err != nil {
		return err
	}
	if err := renameNoReplace(a, b); !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("renameat2 RENAME_NOREPLACE onto an existing directory did not fail as expected (%v); put %s on ext4, xfs, btrfs or tmpfs", err, c.cfg.Root)
	}
	return nil
}

// removeStale removes what a crash left in R/.staging. Entries younger
// than stagingMaxAge may belong to another process's install.
func (c *Catalog) removeStale() {
	entries, err := os.ReadDir(c.stagingDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		// Files carry the real clock's times, whatever Config.Now says.
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > stagingMaxAge {
			os.RemoveAll(filepath.Join(c.stagingDir, e.Name()))
		}
	}
}

// Dir is the directory to mount read-only at MountDir in every sandbox.
func (c *Catalog) Dir() string { return c.liveDir }

// List returns the valid skills and the directories of R/skills that are
// not valid skills, each sorted by name. The error is for R/skills
// itself being unreadable.
func (c *Catalog) List(ctx context.Context) ([]Skill, []Invalid, error) {
	entries, err := os.ReadDir(c.liveDir)
	if err != nil {
		return nil, nil, fmt.Errorf("list skills in %s: %w", c.liveDir, err)
	}
	var skills []Skill
	var invalid []Invalid
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("list skills: %w", err)
		}
		err := c.withSkill(e.Name(), func(_ *os.Root, s Skill, _ string) error {
			skills = append(skills, s)
			return nil
		})
		switch {
		case errors.Is(err, ErrNotFound):
			// Deleted since ReadDir.
		case err != nil:
			invalid = append(invalid, Invalid{Dir: e.Name(), Reason: err.Error()})
		}
	}
	return skills, invalid, nil
}

// Summaries returns the name and description of every valid skill, sorted
// by name; List reports the invalid ones.
func (c *Catalog) Summaries(ctx context.Context) ([]Summary, error) {
	skills, _, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, len(skills))
	for i, s := range skills {
		out[i] = Summary{Name: s.Name, Description: s.Description}
	}
	return out, nil
}

// Get returns one skill.
func (c *Catalog) Get(ctx context.Context, name string) (Skill, error) {
	if err := ctx.Err(); err != nil {
		return Skill{}, err
	}
	var out Skill
	err := c.withSkill(name, func(_ *os.Root, s Skill, _ string) error {
		out = s
		return nil
	})
	return out, err
}

// Body returns SKILL.md without its front matter: the instructions an
// agent loads when it decides to use the skill.
func (c *Catalog) Body(ctx context.Context, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var out string
	err := c.withSkill(name, func(_ *os.Root, _ Skill, body string) error {
		out = body
		return nil
	})
	return out, err
}

// ReadResource returns one of the skill's files, rel being a path from
// Skill.Files. It refuses absolute paths, "..", files not in the skill's
// list, symlinks that lead outside the skill, anything but a regular file,
// and files over MaxFileBytes.
func (c *Catalog) ReadResource(ctx context.Context, name, rel string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	clean, err := cleanRel(rel)
	if err != nil {
		return nil, fmt.Errorf("read resource %q of skill %q: %w", rel, name, err)
	}
	var data []byte
	err = c.withSkill(name, func(root *os.Root, s Skill, _ string) error {
		if !s.has(clean) {
			return fmt.Errorf("read resource %q of skill %q: %w: it is not one of the skill's files (%s)", rel, name, ErrNotFound, listFiles(s.Files))
		}
		target, err := resolveInside(root, clean)
		if err != nil {
			return fmt.Errorf("read resource %q of skill %q: %w", rel, name, err)
		}
		var size int64
		data, size, err = readRegular(root, target, c.cfg.MaxFileBytes)
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("read resource %q of skill %q: %w: it is %d bytes, over the limit of %d; work on it in the sandbox, where it is %s/%s/%s",
				rel, name, ErrTooLarge, size, c.cfg.MaxFileBytes, MountDir, name, clean)
		}
		if err != nil {
			return fmt.Errorf("read resource %q of skill %q: %w", rel, name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// ScriptPath returns the path, as seen inside a sandbox, of a script in
// the skill's scripts/ directory. script is "analyze.py" or
// "scripts/analyze.py"; it gets the same protection as ReadResource.
func (c *Catalog) ScriptPath(ctx context.Context, name, script string) (string, error) {
	p, _, err := c.script(ctx, name, script)
	return p, err
}

// ScriptArgv returns the argv that runs a script of the skill inside a
// sandbox with args, each its own argument: nothing passes through a
// shell. A .py script runs with python3 and a .sh script with bash, so
// that they need no executable bit; any other script must be executable.
func (c *Catalog) ScriptArgv(ctx context.Context, name, script string, args []string) ([]string, error) {
	p, mode, err := c.script(ctx, name, script)
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("run script %q of skill %q: %w: argument %d contains a NUL byte, which no command line can carry", script, name, ErrInvalid, i)
		}
	}
	var argv []string
	switch path.Ext(p) {
	case ".py":
		argv = []string{"python3", p}
	case ".sh":
		argv = []string{"bash", p}
	default:
		if mode&0o111 == 0 {
			return nil, fmt.Errorf("run script %q of skill %q: %w: it is neither .py nor .sh and is not executable; the skill's author must make it executable or name its language", script, name, ErrInvalid)
		}
		argv = []string{p}
	}
	return append(argv, args...), nil
}

func (c *Catalog) script(ctx context.Context, name, script string) (string, fs.FileMode, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, err
	}
	clean, err := cleanRel(script)
	if err != nil {
		return "", 0, fmt.Errorf("script %q of skill %q: %w", script, name, err)
	}
	if !strings.HasPrefix(clean, "scripts/") {
		clean = "scripts/" + clean
	}
	var mode fs.FileMode
	err = c.withSkill(name, func(root *os.Root, s Skill, _ string) error {
		if !s.has(clean) {
			var scripts []string
			for _, f := range s.Files {
				if strings.HasPrefix(f, "scripts/") {
					scripts = append(scripts, f)
				}
			}
			return fmt.Errorf("script %q of skill %q: %w: the skill's scripts are %s", script, name, ErrNotFound, listFiles(scripts))
		}
		target, err := resolveInside(root, clean)
		if err != nil {
			return fmt.Errorf("script %q of skill %q: %w", script, name, err)
		}
		fi, err := root.Stat(target)
		if err != nil {
			return fmt.Errorf("script %q of skill %q: %w", script, name, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("script %q of skill %q: %w: it is not a regular file", script, name, ErrInvalidPath)
		}
		mode = fi.Mode().Perm()
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return MountDir + "/" + name + "/" + clean, mode, nil
}

// Versions returns the skill's live and kept versions, oldest first.
func (c *Catalog) Versions(ctx context.Context, name string) ([]Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("versions of skill %q: %w: the name %v", name, ErrInvalid, err)
	}
	m, err := c.readManifest(name)
	if err != nil {
		return nil, err
	}
	var liveDev, liveIno uint64
	if fi, err := os.Lstat(filepath.Join(c.liveDir, name)); err == nil {
		liveDev, liveIno = fileID(fi)
	}
	var out []Version
	for _, r := range m.Versions {
		v := Version{Number: r.Version, InstalledAt: r.InstalledAt, InstalledBy: r.InstalledBy, Size: r.Size,
			Current: r.Ino != 0 && r.Dev == liveDev && r.Ino == liveIno}
		if !v.Current {
			if _, err := os.Lstat(c.versionDir(name, r.Version)); err != nil {
				continue
			}
		}
		out = append(out, v)
	}
	if out == nil && liveIno == 0 {
		return nil, fmt.Errorf("versions of skill %q: %w", name, ErrNotFound)
	}
	return out, nil
}

func (c *Catalog) versionDir(name string, n int) string {
	return filepath.Join(c.versionsDir, name, fmt.Sprint(n))
}
