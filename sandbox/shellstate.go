package sandbox

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ShellState is the persistent shell's state, read as data from the files
// the previous command's shell saved (see ShellScript).
type ShellState struct {
	// Env holds the exported variables, in the order saved; a variable
	// exported without a value has Set false.
	Env []ShellVar
	// Dir is the directory the last command ended in; "" for none.
	Dir string
	// File is the variables' file in use ("env.a", "env.b" or "env"):
	// the next save writes the other one.
	File string
}

// ShellVar is one exported variable of a ShellState.
type ShellVar struct {
	Name, Value string
	Set         bool
}

// State files are read up to these sizes: a larger file is cut there.
const (
	maxStateFile = 1 << 20
	// maxPrelude bounds the rendered prelude, which travels as one
	// argument (the kernel takes at most 128 KiB) or down a pipe. The
	// variables past it are not restored.
	maxPrelude = 96 << 10
)

// deniedVariables are never restored: each makes a shell or the dynamic
// loader run code of its own choosing when the next command starts, before
// (or besides) anything the policy judged. Bash's read-only variables are
// here too, since assigning them is an error.
var deniedVariables = map[string]bool{
	"BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
	"PS4": true, "PROMPT_COMMAND": true, "IFS": true,
	"LD_PRELOAD": true, "LD_AUDIT": true,
	"BASH_VERSINFO": true, "EUID": true, "PPID": true, "UID": true,
}

// restorable reports whether a saved variable may be restored.
func restorable(name string) bool {
	return validName(name) && !deniedVariables[name] && !strings.HasPrefix(name, "__fb_")
}

// ReadShellState reads the state the previous command left in dir, the
// state directory as the reader sees it. Whatever is missing, unreadable
// or malformed is left out: a sandbox starts with an empty state. The
// files are the sandbox's, so they are opened under dir without following
// a link out of it, and only regular files are read (a FIFO there would
// otherwise hold the reader).
func ReadShellState(dir string) ShellState {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return ShellState{File: "env"}
	}
	defer root.Close()
	st := ShellState{File: "env"}
	if now := firstLine(readStateFile(root, "env.now")); now == "env.a" || now == "env.b" {
		st.File = now
	}
	st.Env = ParseExports(readStateFile(root, st.File))
	if cwd := firstLine(readStateFile(root, "cwd")); strings.HasPrefix(cwd, "/") {
		st.Dir = cwd
	}
	return st
}

// readStateFile reads name under root when it is a regular file, up to
// maxStateFile bytes; nil otherwise.
func readStateFile(root *os.Root, name string) []byte {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile))
	if err != nil && !errors.Is(err, fs.ErrClosed) {
		return nil
	}
	return b
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	if bytes.IndexByte(line, 0) >= 0 {
		return ""
	}
	return string(line)
}

// ParseExports reads the output of `export -p` as bash (`declare -x
// NAME="..."`, `declare -x NAME=$'...'`), dash and BusyBox (`export
// NAME='...'`) print it, up to a line `return` or the first line of any
// other shape. Nothing in it is evaluated: quoting is undone as the shell
// would undo it, and no expansion happens. Variables that may not be
// restored (see restorable) are left out; a name saved twice keeps its
// last value.
func ParseExports(b []byte) []ShellVar {
	var vars []ShellVar
	seen := map[string]int{}
	p := exportParser{b: b}
	for {
		v, ok := p.next()
		if !ok {
			return vars
		}
		if !restorable(v.Name) {
			continue
		}
		if i, dup := seen[v.Name]; dup {
			vars[i] = v
			continue
		}
		seen[v.Name] = len(vars)
		vars = append(vars, v)
	}
}

type exportParser struct {
	b []byte
	i int
}

// next parses one line; false at the end, at `return` or at a malformed
// line.
func (p *exportParser) next() (ShellVar, bool) {
	for p.i < len(p.b) && p.b[p.i] == '\n' {
		p.i++
	}
	rest := p.b[p.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("declare -x ")):
		p.i += len("declare -x ")
	case bytes.HasPrefix(rest, []byte("export ")):
		p.i += len("export ")
	default:
		return ShellVar{}, false // the end, `return`, or garbage
	}
	start := p.i
	for p.i < len(p.b) && isNameByte(p.b[p.i], p.i > start) {
		p.i++
	}
	v := ShellVar{Name: string(p.b[start:p.i])}
	if v.Name == "" {
		return ShellVar{}, false
	}
	if p.i == len(p.b) || p.b[p.i] == '\n' {
		return v, true
	}
	if p.b[p.i] != '=' {
		return ShellVar{}, false
	}
	p.i++
	val, ok := p.word()
	if !ok {
		return ShellVar{}, false
	}
	v.Value, v.Set = val, true
	return v, true
}

// word reads quoted segments up to the end of the line.
func (p *exportParser) word() (string, bool) {
	var out strings.Builder
	for p.i < len(p.b) && p.b[p.i] != '\n' {
		switch {
		case p.b[p.i] == '\'':
			end := bytes.IndexByte(p.b[p.i+1:], '\'')
			if end < 0 {
				return "", false
			}
			out.Write(p.b[p.i+1 : p.i+1+end])
			p.i += end + 2
		case p.b[p.i] == '"':
			if !p.doubleQuoted(&out) {
				return "", false
			}
		case p.b[p.i] == '$' && p.i+1 < len(p.b) && p.b[p.i+1] == '\'':
			p.i++
			if !p.ansiC(&out) {
				return "", false
			}
		default:
			return "", false // unquoted text: not what a shell prints
		}
	}
	return out.String(), true
}

// doubleQuoted reads "..." in which a backslash escapes only $ ` " \ and
// a newline.
func (p *exportParser) doubleQuoted(out *strings.Builder) bool {
	for p.i++; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c == '\\' && p.i+1 < len(p.b) && strings.IndexByte("$`\"\\\n", p.b[p.i+1]) >= 0:
			p.i++
			if p.b[p.i] != '\n' {
				out.WriteByte(p.b[p.i])
			}
		case c == '$' || c == '`':
			return false // an expansion: not what a shell prints
		default:
			out.WriteByte(c)
		}
	}
	return false
}

// ansiC reads $'...' from its opening quote, undoing bash's escapes.
func (p *exportParser) ansiC(out *strings.Builder) bool {
	for p.i++; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		if c == '\'' {
			p.i++
			return true
		}
		if c != '\\' {
			out.WriteByte(c)
			continue
		}
		p.i++
		if p.i == len(p.b) {
			return false
		}
		switch e := p.b[p.i]; e {
		case 'a':
			out.WriteByte('\a')
		case 'b':
			out.WriteByte('\b')
		case 'e', 'E':
			out.WriteByte(0x1b)
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'v':
			out.WriteByte('\v')
		case '\\', '\'', '"', '?':
			out.WriteByte(e)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := 1
			for n < 3 && p.i+n < len(p.b) && p.b[p.i+n] >= '0' && p.b[p.i+n] <= '7' {
				n++
			}
			v, _ := strconv.ParseUint(string(p.b[p.i:p.i+n]), 8, 16)
			if v == 0 || v > 0xff {
				return false // a NUL ends a C string: bash never prints one
			}
			out.WriteByte(byte(v))
			p.i += n - 1
		case 'x':
			n := 0
			for n < 2 && p.i+1+n < len(p.b) && isHex(p.b[p.i+1+n]) {
				n++
			}
			v, err := strconv.ParseUint(string(p.b[p.i+1:p.i+1+n]), 16, 8)
			if err != nil || v == 0 {
				return false
			}
			out.WriteByte(byte(v))
			p.i += n
		default:
			return false
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isNameByte(c byte, notFirst bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || notFirst && c >= '0' && c <= '9'
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i], i > 0) {
			return false
		}
	}
	return true
}

// Prelude renders the state as the persistent shell's $4: one
// single-quoted assignment a line, from names restorable checked. Past
// maxPrelude bytes the remaining variables are left out.
func (st ShellState) Prelude() string {
	var b strings.Builder
	file := st.File
	if file != "env.a" && file != "env.b" {
		file = "env"
	}
	b.WriteString("__fb_e=" + file + "\n")
	if st.Dir != "" && strings.HasPrefix(st.Dir, "/") && !strings.ContainsAny(st.Dir, "\n\x00") {
		b.WriteString("__fb_l=" + ShellQuote(st.Dir) + "\n")
	}
	for _, v := range st.Env {
		if !restorable(v.Name) || strings.IndexByte(v.Value, 0) >= 0 {
			continue
		}
		line := "export " + v.Name
		if v.Set {
			line += "=" + ShellQuote(v.Value)
		}
		if b.Len()+len(line)+1 > maxPrelude {
			break
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// ShellQuote quotes s for a POSIX shell: within single quotes nothing is
// special but the single quote itself.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
