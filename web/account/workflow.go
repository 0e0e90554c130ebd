package account

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/fastgpt"
	"github.com/flowbox/flowbox/web/api"
)

// ExportVersion is the version of the workflow files GET
// /api/apps/:appId/export writes ("flowbox": 1); import reads it.
const ExportVersion = 1

// maxImport bounds an import's body: FastGPT's largest template apps are
// well under 100 KiB.
const maxImport = 2 << 20

// exported is an app's workflow as a file.
type exported struct {
	Flowbox int         `json:"flowbox"`
	Name    string      `json:"name"`
	Graph   nodes.Graph `json:"graph"`
}

// Export answers the app's name and graph as a JSON file to download
// (owner and admins): what Import takes back.
func (h *Apps) Export(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	c.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fileName(app.Name) + ".json"}))
	c.JSON(http.StatusOK, exported{Flowbox: ExportVersion, Name: app.Name, Graph: app.Graph})
}

// fileName is an app's name as a download's file name.
func fileName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`/\:*?"<>|`, r) {
			return '_'
		}
		return r
	}, strings.TrimSpace(name))
	if name == "" {
		return "workflow"
	}
	return name
}

type importBody struct {
	// Name, when set, names the new app; otherwise the file's name does.
	Name string `json:"name"`
	// Workflow is a file of Export, a bare graph, or FastGPT's workflow
	// JSON (its export, or a template file), told apart by their shapes.
	Workflow json.RawMessage `json:"workflow"`
}

// Import makes a private app of the caller's from a workflow file, and
// answers it with a report of what was imported and what was not.
func (h *Apps) Import(c *gin.Context) {
	var body importBody
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, maxImport), &body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.Error(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("the workflow is over %d MiB, the most an import takes", maxImport>>20))
			return
		}
		api.Error(c, http.StatusBadRequest, "the request body is not JSON of the form {\"name\", \"workflow\"}: "+err.Error())
		return
	}
	if w := strings.TrimSpace(string(body.Workflow)); w == "" || w == "null" {
		api.Error(c, http.StatusBadRequest, "give the workflow to import in \"workflow\": a file exported from Flowbox or FastGPT's workflow JSON")
		return
	}
	res, err := h.readWorkflow(body.Workflow)
	if err != nil {
		api.Error(c, http.StatusBadRequest, err.Error())
		return
	}
	name := strings.TrimSpace(body.Name)
	if name == "" {
		name = res.Name
	}
	if name == "" {
		name = "Imported workflow"
	}
	p, _ := api.PrincipalOf(c)
	app := apps.App{ID: api.NewID(), OwnerID: p.UserID, Name: name, Graph: res.Graph}
	err = h.Apps.Put(c.Request.Context(), app, h.Now())
	var invalid *nodes.ValidationError
	switch {
	case errors.As(err, &invalid):
		c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"code": http.StatusUnprocessableEntity,
			"statusText": http.StatusText(http.StatusUnprocessableEntity), "message": err.Error(), "problems": invalid.Problems})
		return
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not save the app; retry later")
		return
	}
	if h.CheckGraph != nil {
		res.Report.Problems = append([]nodes.Problem{}, h.CheckGraph(res.Graph)...)
	}
	saved, err := h.Apps.Get(c.Request.Context(), app.ID)
	if err != nil {
		saved = app
	}
	c.JSON(http.StatusCreated, gin.H{"app": saved, "report": res.Report})
}

// readWorkflow tells the workflow's shape and reads it: Flowbox's export
// ({"flowbox": 1, ...}) or bare graph as it is, anything else as FastGPT's.
func (h *Apps) readWorkflow(raw json.RawMessage) (*fastgpt.Result, error) {
	var probe struct {
		Flowbox *int            `json:"flowbox"`
		Name    string          `json:"name"`
		Graph   json.RawMessage `json:"graph"`
		Nodes   []struct {
			Type         string `json:"type"`
			FlowNodeType string `json:"flowNodeType"`
		} `json:"nodes"`
	}
	probed := json.Unmarshal(raw, &probe) == nil
	var graph json.RawMessage
	switch {
	case probed && probe.Flowbox != nil:
		if *probe.Flowbox != ExportVersion {
			return nil, fmt.Errorf("the file is of Flowbox's export version %d; this engine reads version %d", *probe.Flowbox, ExportVersion)
		}
		if len(probe.Graph) == 0 {
			return nil, errors.New("the Flowbox export has no \"graph\"")
		}
		graph = probe.Graph
	case probed && len(probe.Nodes) > 0 && bareGraph(probe.Nodes):
		graph = raw
	default:
		res, err := fastgpt.Import(raw, h.Templates)
		if err != nil {
			return nil, fmt.Errorf("the workflow cannot be imported: %w", err)
		}
		return res, nil
	}
	res := &fastgpt.Result{Name: strings.TrimSpace(probe.Name), Report: fastgpt.Report{Imported: []fastgpt.Imported{},
		Skipped: []fastgpt.Skipped{}, Fields: []fastgpt.Field{}, Problems: []nodes.Problem{}}}
	if err := json.Unmarshal(graph, &res.Graph); err != nil {
		return nil, fmt.Errorf("the Flowbox graph cannot be read: %v", err)
	}
	for _, n := range res.Graph.Nodes {
		res.Report.Imported = append(res.Report.Imported, fastgpt.Imported{NodeID: n.NodeID, Type: n.Type, Name: n.Name})
	}
	return res, nil
}

// bareGraph says whether nodes are Flowbox's (a type each, no FastGPT
// flowNodeType).
func bareGraph(ns []struct {
	Type         string `json:"type"`
	FlowNodeType string `json:"flowNodeType"`
}) bool {
	for _, n := range ns {
		if n.Type == "" || n.FlowNodeType != "" {
			return false
		}
	}
	return true
}
