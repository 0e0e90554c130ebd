package policy

import _ "embed"

// builtinJSON is the built-in denylist: rules of the same shape as an
// operator's, applied unless a policy sets useBuiltinDenylist to false.
//
//go:embed builtin_denylist.json
var builtinJSON []byte
