package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps/share"
)

// LinkKey holds the share link of a visitor's request in the gin context.
const LinkKey = "flowbox.link"

// LinkOf returns the share link a visitor came through, if any.
func LinkOf(c *gin.Context) (share.Link, bool) {
	v, ok := c.Get(LinkKey)
	if !ok {
		return share.Link{}, false
	}
	l, ok := v.(share.Link)
	return l, ok
}

// VisitorFiles refuses file operations a visitor's link does not allow;
// it answers the client itself and returns false then.
func VisitorFiles(c *gin.Context, action string) bool {
	link, ok := LinkOf(c)
	if !ok {
		return true
	}
	switch {
	case link.Files == share.FilesHidden:
		Error(c, http.StatusForbidden, "this share link does not show the sandbox's files")
		return false
	case link.Files == share.FilesReadOnly && strings.EqualFold(action, "write"):
		Error(c, http.StatusForbidden, "this share link shows the sandbox's files read-only")
		return false
	}
	return true
}
