package policy

import (
	"maps"
	"sync"
)

// History is what a chat's earlier commands left defined for the next
// ones: exported variables, functions and aliases. Functions and aliases
// do not outlive a command in Flowbox's shell, but a history keeps them
// as possible, so that the next command's use of them is judged both
// ways. It is safe for concurrent use.
type History struct {
	mu      sync.RWMutex
	vars    map[string]string
	funcs   map[string]*funcDef
	aliases map[string]string
	cwd     string // where the shell is, "" when not known
}

// NewHistory replays commands, oldest first.
func NewHistory(commands ...string) *History {
	h := &History{vars: map[string]string{}, funcs: map[string]*funcDef{}, aliases: map[string]string{}, cwd: workDir}
	for _, c := range commands {
		h.Add(c)
	}
	return h
}

// Add records a command that ran.
func (h *History) Add(command string) {
	j := newJudge(Denylist, nil, h)
	j.record = true
	j.script(command, flow{})
	h.mu.Lock()
	defer h.mu.Unlock()
	vars := map[string]string{}
	for k, v := range j.sc.vars {
		_, had := h.vars[k]
		if (had || j.exported[k]) && k != "IFS" && k != "HOME" {
			vars[k] = v
		}
	}
	h.vars = vars
	h.cwd = j.sc.cwd
	for k, f := range j.sc.funcs {
		cp := *f
		cp.certain, cp.called = false, true
		h.funcs[k] = &cp
	}
	maps.Copy(h.aliases, j.sc.aliases)
	for k := range h.aliases {
		if _, ok := j.sc.aliases[k]; !ok {
			delete(h.aliases, k)
		}
	}
}
