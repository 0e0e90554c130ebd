package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// A warm pool's member (sandbox.Spec.Pool) is a container like any other,
// with LabelPoolMember. Adopt gives it the chat's name: the container is
// renamed, and its host directory moves to the chat's id. What cannot
// follow stays as it was:
//
//   - Labels are immutable, so the container keeps LabelSandbox with the
//     pool id. List tells an adopted member by its name, which no longer
//     matches that label, and reads the chat's labels from its record
//     (recordFile).
//   - The daemon finds a stopped container's bind mounts by path when it
//     starts it again, and they name the pool id's directory. That path
//     becomes a link to the chat's directory, which the chat's sandbox's
//     Delete removes. Meanwhile the pool id names nothing: every method
//     refuses an id whose directory is such a link.

var (
	_ sandbox.Adopter = (*Provider)(nil)
	_ sandbox.Imager  = (*Provider)(nil)
)

// Image implements sandbox.Imager: the image new sandboxes run, and the
// runtime when one is set, part of the warm pool's shape.
func (p *Provider) Image() string {
	if p.cfg.Runtime != "" {
		return p.cfg.Image + " (" + p.cfg.Runtime + ")"
	}
	return p.cfg.Image
}

// Adopt implements sandbox.Adopter: the running member poolID becomes
// sandbox spec.ID. Its image and runtime must be this provider's, its
// limits, network and egress spec's, and spec's mounts at its mounts'
// targets (the caller moved their directories and left links at the old
// paths). On failure what was done is undone, in reverse order, and the
// member stays poolID.
func (p *Provider) Adopt(ctx context.Context, poolID string, spec sandbox.Spec) (err error) {
	id := spec.ID
	if err := checkID(poolID); err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	fail := func(err error) error {
		return fmt.Errorf("adopt warm pool member %s as sandbox %s: %w", poolID, id, err)
	}
	if err := p.checkEgress(spec); err != nil {
		return fail(err)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return fail(err)
	}
	spec.Mounts = mounts

	res, err := p.cli.ContainerInspect(ctx, ContainerName(poolID), client.ContainerInspectOptions{})
	if err != nil {
		return fail(p.apiErr("inspect the member", err))
	}
	member := res.Container
	switch {
	case member.Config == nil || member.Config.Labels[LabelPoolMember] != "true" || member.Config.Labels[LabelSandbox] != poolID:
		return fail(fmt.Errorf("the sandbox %s is no warm pool member: %w", poolID, sandbox.ErrNotFound))
	case statusOf(stateOf(member)) != sandbox.StatusRunning:
		return fail(fmt.Errorf("the member does not run: %w", sandbox.ErrNotFound))
	}
	if err := p.checkShape(member, spec); err != nil {
		return fail(err)
	}
	if fi, err := os.Lstat(p.hostDir(poolID)); err != nil || !fi.IsDir() {
		return fail(fmt.Errorf("the member's directory %s is missing or not a directory (%v)", p.hostDir(poolID), err))
	}
	old, hadOld, err := p.readRecord(poolID)
	if err != nil {
		return fail(err)
	}
	if _, err := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{}); err == nil {
		return fail(errors.New("the sandbox exists already"))
	} else if !cerrdefs.IsNotFound(err) {
		return fail(p.apiErr("inspect the sandbox", err))
	}
	// A concurrent Ensure of id could still make the directory between
	// this check and the rename; its container would then lose to ours
	// (or ours to it), and the rename fails on a directory with files.
	if _, err := os.Lstat(p.hostDir(id)); err == nil {
		return fail(fmt.Errorf("the sandbox's directory %s exists already", p.hostDir(id)))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}

	var undo sandbox.Cleanup
	defer func() {
		if err == nil {
			return
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if uerr := undo.Run(uctx); uerr != nil {
			p.log.Error("warm pool adoption was not fully rolled back", "poolId", poolID, "sandbox", id, "err", uerr)
			err = errors.Join(err, fmt.Errorf("roll back: %w", uerr))
		}
		err = fail(err)
	}()

	// The member's egress is served under the chat's id from here on.
	if p.cfg.Egress != nil {
		if allow := p.cfg.Egress.Allowlist(poolID); allow != nil {
			p.closeEgress(poolID)
			undo.Add("serve the member's egress again", func(context.Context) error {
				return p.cfg.Egress.Restore(poolID, filepath.Join(p.egressDir(poolID), egress.SocketName), allow)
			})
		}
	}

	// The member's directory, bound into the running container, moves
	// with what the container sees; a link at its old path keeps the
	// container's bind mounts valid for its next start. The link is
	// relative, so that it holds for the daemon's view of the root too.
	if err := os.Rename(p.hostDir(poolID), p.hostDir(id)); err != nil {
		return fmt.Errorf("move the member's directory: %w", err)
	}
	undo.Add("move the directory back", func(context.Context) error {
		return os.Rename(p.hostDir(id), p.hostDir(poolID))
	})
	if err := os.Symlink(id, p.hostDir(poolID)); err != nil {
		return fmt.Errorf("link the member's directory to the sandbox's: %w", err)
	}
	undo.Add("remove the link", func(context.Context) error { return os.Remove(p.hostDir(poolID)) })
	rec := record{Mounts: mergeMounts(old.Mounts, spec.Mounts), Pool: poolID, Labels: ownerLabels(spec.Labels)}
	if err := p.writeRecord(id, rec); err != nil {
		return err
	}
	undo.Add("restore the member's record", func(context.Context) error {
		if !hadOld {
			return ignoreMissing(os.Remove(filepath.Join(p.hostDir(id), recordFile)))
		}
		return p.writeRecord(id, old)
	})

	// The rename is what makes the member the chat's, for List and for
	// every other engine process.
	if _, err := p.cli.ContainerRename(ctx, ContainerName(poolID), client.ContainerRenameOptions{NewName: ContainerName(id)}); err != nil {
		return p.apiErr("rename the container", err)
	}
	undo.Add("rename the container back", func(ctx context.Context) error {
		_, err := p.cli.ContainerRename(ctx, ContainerName(id), client.ContainerRenameOptions{NewName: ContainerName(poolID)})
		return err
	})
	if err := p.openEgress(spec); err != nil {
		return err
	}
	return nil
}

// checkShape says how the member differs from what spec would create:
// its image, runtime, limits, network, egress forwarder and mount
// targets. An adoption must not give a chat more than its spec allows,
// nor less than it needs.
func (p *Provider) checkShape(member container.InspectResponse, spec sandbox.Spec) error {
	want := p.createOptions(spec, false).HostConfig
	hc := member.HostConfig
	if hc == nil {
		return errors.New("the member has no host configuration")
	}
	var diffs []string
	differs := func(what string, got, want any) {
		diffs = append(diffs, fmt.Sprintf("%s %v, the spec's %v", what, got, want))
	}
	if member.Config != nil && member.Config.Image != p.cfg.Image {
		differs("image", member.Config.Image, p.cfg.Image)
	}
	if p.cfg.Runtime != "" && hc.Runtime != p.cfg.Runtime {
		differs("runtime", hc.Runtime, p.cfg.Runtime)
	}
	if hc.NetworkMode != want.NetworkMode {
		differs("network", hc.NetworkMode, want.NetworkMode)
	}
	if hc.Memory != want.Memory {
		differs("memory", hc.Memory, want.Memory)
	}
	if hc.NanoCPUs != want.NanoCPUs {
		differs("nano CPUs", hc.NanoCPUs, want.NanoCPUs)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != *want.PidsLimit {
		differs("pids limit", hc.PidsLimit, *want.PidsLimit)
	}
	targets := make([]string, 0, len(member.Mounts))
	for _, m := range member.Mounts {
		targets = append(targets, m.Destination)
	}
	if has, wants := slices.Contains(targets, egress.SocketDir), len(spec.Egress) > 0 || spec.Network; has != wants {
		differs("egress forwarder", has, wants)
	}
	if member.Config != nil && (member.Config.Labels[LabelNetwork] == "full") != spec.Network {
		differs("network", member.Config.Labels[LabelNetwork] == "full", spec.Network)
	}
	for _, m := range spec.Mounts {
		if !slices.Contains(targets, m.Target) {
			differs("mount at "+m.Target, "none", m.Source)
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the member has another shape than the spec: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// adoptedAway reports whether id's host directory is the link an
// adoption left at a pool id's old place: id names nothing then.
func (p *Provider) adoptedAway(id string) bool {
	fi, err := os.Lstat(p.hostDir(id))
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// removePoolLink removes the link an adoption left at the pool id's
// place, if it still leads to sandbox id.
func (p *Provider) removePoolLink(id string) error {
	rec, _, err := p.readRecord(id)
	if err != nil || rec.Pool == "" {
		return err
	}
	link := p.hostDir(rec.Pool)
	if target, err := os.Readlink(link); err != nil || target != id {
		return nil // gone already, or not ours
	}
	return ignoreMissing(os.Remove(link))
}

// removeDanglingLink removes id's host directory when it is a link to a
// directory that is gone (an adopted sandbox deleted by an older engine,
// say); a link that leads somewhere stays, for the sandbox it leads to.
func (p *Provider) removeDanglingLink(id string) error {
	if _, err := os.Stat(p.hostDir(id)); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return ignoreMissing(os.Remove(p.hostDir(id)))
}

// ownerLabels are the labels a spec's sandbox is listed with: the
// product's own keys are not the owner's to set.
func ownerLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if !reservedLabel(k) {
			out[k] = v
		}
	}
	return out
}

// reservedLabel reports whether a spec's label key k would stand for one
// of the product's own labels.
func reservedLabel(k string) bool {
	switch LabelPrefix + k {
	case LabelManaged, LabelSandbox, LabelPoolMember:
		return true
	}
	return false
}

// listedAs is how List reports the container c, whose LabelSandbox is
// label: as the pool member label, as the sandbox it was adopted as
// (named by its container), or, ok false, not at all.
func (p *Provider) listedAs(c container.Summary, label string) (id string, pool bool, labels map[string]string, ok bool) {
	labels = map[string]string{}
	for k, v := range c.Labels {
		if name, ok := strings.CutPrefix(k, LabelPrefix); ok && !reservedLabel(name) {
			labels[name] = v
		}
	}
	if c.Labels[LabelPoolMember] != "true" {
		return label, false, labels, true
	}
	name := ""
	for _, n := range c.Names {
		if s, ok := strings.CutPrefix(n, "/"+ContainerName("")); ok && sandbox.ValidID(s) {
			name = s
		}
	}
	switch name {
	case "":
		return "", false, nil, false // renamed by hand: not a sandbox
	case label:
		return label, true, labels, true
	}
	rec, _, err := p.readRecord(name)
	if err == nil && rec.Pool != label {
		err = fmt.Errorf("its record names the pool id %q", rec.Pool)
	}
	if err != nil {
		// Still the chat's sandbox, not a member: without its owner's
		// labels, reconciliation finds it by its id. A container of
		// another workspace root (another engine's) keeps its record
		// where this process does not look.
		log := p.log.Warn
		if !slices.ContainsFunc(c.Mounts, func(m container.MountPoint) bool {
			return m.Destination == sandbox.WorkspaceDir && m.Source == filepath.Join(p.cfg.DaemonWorkspaceRoot, label, "workspace")
		}) {
			log = p.log.Debug
		}
		log("an adopted sandbox is listed without its labels", "sandbox", name, "poolId", label, "err", err)
		return name, false, map[string]string{}, true
	}
	if rec.Labels == nil {
		rec.Labels = map[string]string{}
	}
	return name, false, rec.Labels, true
}

// mergeMounts are the member's mounts with the spec's in place of those
// at the same targets: the spec's sources are where the caller moved
// the member's directories.
func mergeMounts(member, spec []sandbox.Mount) []sandbox.Mount {
	out := slices.Clone(spec)
	for _, m := range member {
		if !slices.ContainsFunc(spec, func(s sandbox.Mount) bool { return s.Target == m.Target }) {
			out = append(out, m)
		}
	}
	return out
}
