package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/flowbox/flowbox/sandbox"
)

// recordFile, in the sandbox's host directory beside its workspace and
// out of the container's reach, keeps what the container's configuration
// cannot say, or says only as the daemon sees it.
const recordFile = "sandbox.json"

// record is the content of recordFile.
type record struct {
	// Mounts are the spec's mounts (sandbox.Spec.Mounts), with the
	// engine's paths: Files serves their directories.
	Mounts []sandbox.Mount `json:"mounts,omitempty"`
	// Pool, set by Adopt, is the warm pool id the sandbox had: its
	// container's LabelSandbox, and the name of the link to its
	// directory.
	Pool string `json:"pool,omitempty"`
	// Labels, set by Adopt, are the owner's (sandbox.Spec.Labels), which
	// List reports instead of the container's.
	Labels map[string]string `json:"labels,omitempty"`
}

// writeRecord writes the sandbox's recordFile, atomically.
func (p *Provider) writeRecord(id string, rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("write the sandbox's record: %w", err)
	}
	path := filepath.Join(p.hostDir(id), recordFile)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write the sandbox's record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the sandbox's record: %w", err)
	}
	return nil
}

// readRecord reads the sandbox's recordFile; ok is false when it has
// none (a sandbox created before records).
func (p *Provider) readRecord(id string) (rec record, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(p.hostDir(id), recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err == nil && rec.Pool != "" && !sandbox.ValidID(rec.Pool) {
		err = fmt.Errorf("the pool id %q is not a sandbox id", rec.Pool)
	}
	if err != nil {
		return record{}, false, fmt.Errorf("read the record of sandbox %s: %w", id, err)
	}
	return rec, true, nil
}
