package sandboxapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// sandboxOpenAPI is the OpenAPI 3 document of /api/sandbox/v1. It is
// embedded so that what a client reads is what this binary serves;
// openapi_test.go checks it against the router.
//
//go:embed openapi/sandbox-v1.json
var sandboxOpenAPI []byte

// sandboxOpenAPIETag lets clients revalidate instead of downloading the
// document again: it changes only with the binary.
var sandboxOpenAPIETag = func() string {
	sum := sha256.Sum256(sandboxOpenAPI)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// OpenAPI serves the sandbox API's OpenAPI document. It needs no
// credentials: the document says how to call the API, not what is in it.
func OpenAPI(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Type", "application/json")
	h.Set("ETag", sandboxOpenAPIETag)
	// Short enough that an upgraded engine's document is seen soon; the
	// ETag makes the revalidations after it cheap.
	h.Set("Cache-Control", "public, max-age=300")
	http.ServeContent(c.Writer, c.Request, "sandbox-v1.json", time.Time{}, bytes.NewReader(sandboxOpenAPI))
}

// SandboxOpenAPIDocument returns a copy of the document, for tests and
// clients that embed the engine.
func OpenAPIDocument() []byte { return bytes.Clone(sandboxOpenAPI) }
