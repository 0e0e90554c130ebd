// Package schemas holds Flowbox's JSON Schemas: the node templates (their
// inputs with labels and defaults, and their outputs) and the documents
// the engine stores. They are embedded in the binary; the engine validates
// apps against them when an app is saved and when it runs.
package schemas

import "embed"

// FS holds every schema: nodes/<type>.json for the node templates,
// sandbox_instance.schema.json for the records.
//
//go:embed nodes/*.json *.json
var FS embed.FS
