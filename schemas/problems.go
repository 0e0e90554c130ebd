package schemas

import (
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// english prints the validator's messages.
var english = message.NewPrinter(language.English)

// Problems turns a validation error into one line per failing
// field, each named by its JSON pointer.
func Problems(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var lines []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		// A oneOf or anyOf failure lists every branch's complaint; the
		// branch that got furthest is the useful one, but all are kept
		// when none did: the field is named either way.
		if len(e.Causes) == 0 {
			where := "/" + strings.Join(e.InstanceLocation, "/")
			if _, isReq := e.ErrorKind.(*kind.Required); isReq && where == "/" {
				where = "(top level)"
			}
			lines = append(lines, where+": "+e.ErrorKind.LocalizedString(english))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	seen := map[string]bool{}
	out := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}
