package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox/skills"
	exampleskills "github.com/flowbox/flowbox/skills"
	"github.com/flowbox/flowbox/web/api"
)

// SkillCatalog is the installed skills (skills.Catalog).
type SkillCatalog interface {
	List(ctx context.Context) ([]skills.Skill, []skills.Invalid, error)
	Get(ctx context.Context, name string) (skills.Skill, error)
	Body(ctx context.Context, name string) (string, error)
	Versions(ctx context.Context, name string) ([]skills.Version, error)
	Install(ctx context.Context, r io.ReaderAt, size int64, by string) (skills.Skill, error)
	Delete(ctx context.Context, name string) error
}

// Skills serves the skills admins install (K4): list (with the
// directories that are not valid skills and why), view, install or
// replace from a ZIP, delete. Builders read the list to choose an app's
// skills.
type Skills struct {
	Catalog SkillCatalog
	// MaxZip bounds an uploaded archive; default 20 MiB.
	MaxZip int64
}

// skillJSON is a skill on the wire.
type skillJSON struct {
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	AllowedTools  []string          `json:"allowedTools,omitempty"`
	Version       int               `json:"version"`
	Files         []string          `json:"files"`
	Size          int64             `json:"size"`
	InstalledAt   time.Time         `json:"installedAt"`
	InstalledBy   string            `json:"installedBy,omitempty"`
	Location      string            `json:"location"`
}

func wireSkill(s skills.Skill) skillJSON {
	return skillJSON{Name: s.Name, Description: s.Description, License: s.License, Compatibility: s.Compatibility,
		Metadata: s.Metadata, AllowedTools: s.AllowedTools, Version: s.Version, Files: s.Files, Size: s.Size,
		InstalledAt: s.InstalledAt, InstalledBy: s.InstalledBy, Location: s.SandboxDir()}
}

// List serves GET /admin/api/skills: the installed skills, and the
// directories that are not valid skills with the reason.
func (h *Skills) List(c *gin.Context) { h.list(c, true) }

// Choices serves GET /api/skills: the installed skills, for builders to
// choose an app's.
func (h *Skills) Choices(c *gin.Context) { h.list(c, false) }

func (h *Skills) list(c *gin.Context, admin bool) {
	list, invalid, err := h.Catalog.List(c.Request.Context())
	if err != nil {
		api.Fail(c, err, "the skills could not be read or written")
		return
	}
	out := make([]skillJSON, len(list))
	for i, s := range list {
		out[i] = wireSkill(s)
	}
	resp := gin.H{"skills": out}
	if admin {
		if invalid == nil {
			invalid = []skills.Invalid{}
		}
		bad := make([]gin.H, len(invalid))
		for i, v := range invalid {
			bad[i] = gin.H{"dir": v.Dir, "reason": v.Reason}
		}
		resp["invalid"] = bad
		// The examples the engine carries, and whether each is installed.
		examples, err := exampleskills.Examples()
		if err != nil {
			api.Error(c, http.StatusInternalServerError, "the example skills could not be read: "+err.Error())
			return
		}
		wire := make([]gin.H, len(examples))
		for i, e := range examples {
			installed := slices.ContainsFunc(list, func(s skills.Skill) bool { return s.Name == e.Name })
			wire[i] = gin.H{"name": e.Name, "description": e.Description, "installed": installed}
		}
		resp["examples"] = wire
	}
	c.JSON(http.StatusOK, resp)
}

// Get serves GET /admin/api/skills/{name}: the skill, its instructions
// and its versions.
func (h *Skills) Get(c *gin.Context) {
	ctx := c.Request.Context()
	s, err := h.Catalog.Get(ctx, c.Param("name"))
	if err != nil {
		api.Fail(c, err, "the skills could not be read or written")
		return
	}
	body, err := h.Catalog.Body(ctx, s.Name)
	if err != nil {
		api.Fail(c, err, "the skills could not be read or written")
		return
	}
	versions, err := h.Catalog.Versions(ctx, s.Name)
	if err != nil {
		api.Fail(c, err, "the skills could not be read or written")
		return
	}
	wire := make([]gin.H, len(versions))
	for i, v := range versions {
		wire[i] = gin.H{"number": v.Number, "installedAt": v.InstalledAt, "installedBy": v.InstalledBy, "size": v.Size, "current": v.Current}
	}
	c.JSON(http.StatusOK, gin.H{"skill": wireSkill(s), "instructions": body, "versions": wire})
}

// Install serves POST /admin/api/skills: a skill's ZIP as the body
// (application/zip) or as the "file" part of a multipart form. A skill
// of the same name is replaced as a new version; chats running its
// scripts keep the files they opened.
func (h *Skills) Install(c *gin.Context) {
	max := h.MaxZip
	if max <= 0 {
		max = 20 << 20
	}
	body := io.Reader(http.MaxBytesReader(c.Writer, c.Request.Body, max+1<<20))
	ct, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if ct == "multipart/form-data" {
		mr, err := c.Request.MultipartReader()
		if err != nil {
			api.Error(c, http.StatusBadRequest, "the multipart body cannot be read: "+err.Error())
			return
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				api.Error(c, http.StatusBadRequest, `send the skill's ZIP in a part named "file"`)
				return
			}
			if part.FormName() == "file" {
				body = part
				break
			}
		}
	}
	tmp, err := os.CreateTemp("", "flowbox-skill-*.zip")
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not store the archive; retry later")
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(body, max+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || n > max:
		api.Error(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("the archive is over %d MiB, the limit (FLOWBOX_SKILL_MAX_ZIP_MIB)", max>>20))
		return
	case err != nil:
		api.Error(c, http.StatusBadRequest, "the archive did not arrive whole: "+err.Error())
		return
	case n == 0:
		api.Error(c, http.StatusBadRequest, "send the skill's ZIP as the body (application/zip) or in a multipart part named \"file\"")
		return
	}
	h.install(c, tmp, n)
}

// install installs the archive r of size bytes and answers the skill.
func (h *Skills) install(c *gin.Context, r io.ReaderAt, size int64) {
	p, _ := api.PrincipalOf(c)
	by := p.UserID
	if by == "" {
		by = "admin-token"
	}
	s, err := h.Catalog.Install(c.Request.Context(), r, size, by)
	if err != nil {
		api.Fail(c, err, "the skills could not be read or written")
		return
	}
	c.JSON(http.StatusCreated, gin.H{"skill": wireSkill(s)})
}

// InstallExample serves POST /admin/api/skills/examples/{name}: installs
// one of the example skills the engine carries, as an upload of its
// folder would.
func (h *Skills) InstallExample(c *gin.Context) {
	name := c.Param("name")
	archive, err := exampleskills.Zip(name)
	if errors.Is(err, fs.ErrNotExist) {
		api.Error(c, http.StatusNotFound, fmt.Sprintf("no example skill %q; GET /admin/api/skills lists them under examples", name))
		return
	} else if err != nil {
		api.Error(c, http.StatusInternalServerError, "the example skill could not be packed: "+err.Error())
		return
	}
	h.install(c, bytes.NewReader(archive), int64(len(archive)))
}

// Delete serves DELETE /admin/api/skills/{name}.
func (h *Skills) Delete(c *gin.Context) {
	if err := h.Catalog.Delete(c.Request.Context(), c.Param("name")); err != nil {
		api.Fail(c, err, "the skills could not be read or written")
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": c.Param("name")})
}
