package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// manifest is R/skill-versions/{name}/manifest.json: one record per
// version the catalog knows, the live one and the kept ones.
type manifest struct {
	Name     string          `json:"name"`
	Versions []versionRecord `json:"versions"`
}

type versionRecord struct {
	Version     int       `json:"version"`
	InstalledAt time.Time `json:"installedAt"`
	InstalledBy string    `json:"installedBy"`
	Size        int64     `json:"size"`
	// Dev and Ino identify the version's directory, which keeps them when
	// it is renamed from staging to live to kept.
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func (c *Catalog) manifestPath(name string) string {
	return filepath.Join(c.versionsDir, name, "manifest.json")
}

// readManifest returns an empty manifest when the skill has none.
func (c *Catalog) readManifest(name string) (manifest, error) {
	m := manifest{Name: name}
	data, err := os.ReadFile(c.manifestPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("read the version records of skill %q: %w", name, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("read the version records of skill %q: %s is corrupt (%v); remove it to start the skill's history again", name, c.manifestPath(name), err)
	}
	return m, nil
}

// writeManifest replaces the manifest with one rename, so that a reader
// sees the old or the new records, never a part.
func (c *Catalog) writeManifest(m manifest) error {
	sort.Slice(m.Versions, func(i, j int) bool { return m.Versions[i].Version < m.Versions[j].Version })
	dir := filepath.Join(c.versionsDir, m.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write the version records of skill %q: %w", m.Name, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("write the version records of skill %q: %w", m.Name, err)
	}
	f, err := os.CreateTemp(dir, ".manifest-*")
	if err != nil {
		return fmt.Errorf("write the version records of skill %q: %w", m.Name, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.manifestPath(m.Name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the version records of skill %q: %w", m.Name, err)
	}
	return syncDir(dir)
}

// byID finds the record of the directory with this identity.
func (m manifest) byID(dev, ino uint64) (versionRecord, bool) {
	if ino == 0 {
		return versionRecord{}, false
	}
	for _, r := range m.Versions {
		if r.Dev == dev && r.Ino == ino {
			return r, true
		}
	}
	return versionRecord{}, false
}

func (m manifest) next() int {
	n := 0
	for _, r := range m.Versions {
		n = max(n, r.Version)
	}
	return n + 1
}

func (m *manifest) drop(version int) {
	kept := m.Versions[:0]
	for _, r := range m.Versions {
		if r.Version != version {
			kept = append(kept, r)
		}
	}
	m.Versions = kept
}

// syncDir makes a directory's entries (a rename, a new file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
