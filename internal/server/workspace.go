package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/flowbox/flowbox/internal/config"
	"github.com/flowbox/flowbox/nodes/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/sandbox/workspace"
	"github.com/flowbox/flowbox/workers"
)

// promptFiles is how many of a chat's files the system prompt lists.
const promptFiles = 30

// openWorkspace opens the chats' files and the skills under the files
// directory (K1, K4).
func openWorkspace(cfg config.Files, provider string, log *slog.Logger) (*workspace.Store, *skills.Catalog, error) {
	ws, err := workspace.New(workspace.Config{Root: cfg.Dir, MaxFileBytes: cfg.MaxFileMiB << 20, MaxChatBytes: cfg.MaxChatMiB << 20,
		ChatDisk: chatDisk(cfg.ChatDisk, provider, log)})
	if err != nil {
		return nil, nil, fmt.Errorf("open the chats' files under FLOWBOX_FILES_DIR=%s: %w", cfg.Dir, err)
	}
	cat, err := skills.New(skills.Config{Root: cfg.Dir, MaxZipBytes: cfg.MaxSkillZipMiB << 20})
	if err != nil {
		return nil, nil, fmt.Errorf("open the skills under FLOWBOX_FILES_DIR=%s: %w", cfg.Dir, err)
	}
	return ws, cat, nil
}

// chatDisk decides FLOWBOX_FILES_CHAT_DISK's auto: a chat's disk is a
// loop mount in the engine's mount namespace, which bwrap's sandboxes
// see; a Docker daemon or a Kubernetes node may not (the engine in a
// container, the files on a network volume), so there it is asked for
// with "on".
func chatDisk(setting, provider string, log *slog.Logger) bool {
	switch setting {
	case "on":
		return true
	case "off":
		return false
	}
	if provider != "bwrap" {
		return false
	}
	_, mkfs := exec.LookPath("mkfs.ext4")
	if os.Geteuid() != 0 || mkfs != nil {
		log.Warn("the chats' quota does not bound what sandboxes write into uploads and intermediate: the engine needs root and mkfs.ext4 (e2fsprogs) to give each chat a disk of its quota (FLOWBOX_FILES_CHAT_DISK)")
		return false
	}
	return true
}

// mountsFor is what a chat's sandbox sees of the workspace: its uploads
// and intermediate files, and the skills read-only. Every sandbox that
// starts asks for them, so a low data disk refuses it here.
func (s *Services) mountsFor(ctx context.Context, scope sandbox.Scope) ([]sandbox.Mount, error) {
	if err := s.DataDisk.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	mounts, err := s.Workspace.Mounts(ctx, scope)
	if err != nil {
		return nil, err
	}
	return append(mounts, s.skillsMount()), nil
}

// skillsMount shows every sandbox the installed skills, read-only.
func (s *Services) skillsMount() sandbox.Mount {
	return sandbox.Mount{Source: s.Skills.Dir(), Target: sandbox.SkillsDir, ReadOnly: true}
}

// requestPoolRefill has the workers refill the warm pool after an
// adoption.
func (s *Services) requestPoolRefill() {
	if f := s.poolRefill.Load(); f != nil {
		(*f)()
	}
}

// promptWorkspace lists a chat's files for the tool-call node's prompt.
type promptWorkspace struct{ ws *workspace.Store }

func (p promptWorkspace) Summary(ctx context.Context, scope sandbox.Scope) (string, error) {
	sum, err := p.ws.Summary(ctx, scope, promptFiles)
	if err != nil {
		return "", err
	}
	return sum.String(), nil
}

// workspaceData deletes the files of deleted chats and apps (the
// deletion tasks' ChatData) and, in reconciliation, those no chat owns.
// A chat's directory is named after its sandbox, which the chat's user
// names too: the owners are read from the directories.
type workspaceData struct {
	ws       *workspace.Store
	chats    *history.Store
	sandbox  sandbox.Store
	provider string
}

var _ workers.OrphanedData = workspaceData{}

// RemoveOrphans removes the directories older than before whose chat is
// not recorded and whose sandbox has no record either (a chat's first
// turn is recorded when it ends, its sandbox when it starts), and those
// whose owner is unknown.
func (w workspaceData) RemoveOrphans(ctx context.Context, before time.Time) (int, error) {
	dirs, err := w.ws.Dirs(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, o := range dirs {
		if !o.CreatedAt.Before(before) {
			continue
		}
		if o.Known() {
			if _, err := w.chats.Get(ctx, o.Scope()); !errors.Is(err, history.ErrNotFound) {
				continue // the chat exists, or it cannot be told now
			}
			if _, err := w.sandbox.Get(ctx, w.provider, o.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
				continue
			}
		}
		if err := w.ws.DeleteID(ctx, o.SandboxID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// DeleteChats deletes the chats' directories; a chat without a user
// stands for that chat id of every user of its app.
func (w workspaceData) DeleteChats(ctx context.Context, chats []sandbox.Scope) error {
	want := map[sandbox.Scope]bool{}
	for _, c := range chats {
		want[c] = true
	}
	dirs, err := w.ws.Dirs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range dirs {
		if o.Known() && (want[o.Scope()] || want[sandbox.Scope{AppID: o.AppID, ChatID: o.ChatID}]) {
			errs = append(errs, w.ws.DeleteID(ctx, o.SandboxID))
		}
	}
	return errors.Join(errs...)
}

func (w workspaceData) DeleteApp(ctx context.Context, appID string) error {
	return w.ws.DeleteApp(ctx, appID)
}
