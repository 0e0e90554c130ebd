//go:build !linux

package workspace

import "errors"

var errNoExchange = errors.New("the warm pool's directory exchange needs Linux")

func renameExchange(a, b string) error      { return errNoExchange }
func renameNoReplace(from, to string) error { return errNoExchange }
