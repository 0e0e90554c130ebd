package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// promptFiles is how many of a chat's files the system prompt lists.
const promptFiles = 30

// openWorkspace opens the chats' files and the skills under the files
// directory (K1, K4).
func openWorkspace(cfg config.Files, provider string, pool workspace.Pool, log *slog.Logger) (*workspace.Store, *skills.Catalog, error) {
	ws, err := workspace.New(workspace.Config{Root: cfg.Dir, MaxFileBytes: cfg.MaxFileMiB << 20, MaxChatBytes: cfg.MaxChatMiB << 20,
		ChatDisk: pool == nil && chatDisk(cfg.ChatDisk, provider, log), Pool: pool})
	if err != nil {
		return nil, nil, fmt.Errorf("open the chats' files under FLOWBOX_FILES_DIR=%s: %w", cfg.Dir, err)
	}
	cat, err := skills.New(skills.Config{Root: cfg.Dir, MaxZipBytes: cfg.MaxSkillZipMiB << 20})
	if err != nil {
		return nil, nil, fmt.Errorf("open the skills under FLOWBOX_FILES_DIR=%s: %w", cfg.Dir, err)
	}
	return ws, cat, nil
}

// openChatsPool opens the pool of the chats' files in the checkpoint
// pool's filesystem, which the provider's pool has mounted.
func openChatsPool(sc config.Sandbox) (workspace.Pool, error) {
	pool, err := checkpoint.OpenChats(filepath.Join(sc.CheckpointPool, "chats"))
	if err != nil {
		return nil, fmt.Errorf("keep the chats' files in the checkpoint pool (FLOWBOX_CHECKPOINT_POOL=%s): %w", sc.CheckpointPool, err)
	}
	return pool, nil
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
