// Package agent is the exec agent: a small server that runs inside a
// sandbox as its main process and runs the engine's commands there, and
// the engine's client for it. A command costs a connection to a Unix
// socket instead of a round trip through a container runtime; its shell is
// usually started before it arrives (spare shells, spare_linux.go).
//
// The agent runs every command through the persistent shell
// (sandbox.ShellScript) in a session of its own, streams its output back and,
// when the command ends, times out or is cancelled, kills every process it
// left behind. It must never let a command's processes outlive it, never
// trust its requests, and never die of a bad one.
//
// The client treats the socket's path and everything the agent sends as
// hostile: the sandbox can write the directory the socket lives in, and
// whoever answers on it may be the sandbox itself. It must never follow a
// link the sandbox planted there.
//
// # Protocol
//
// One command per connection. The client sends one JSON line,
//
//	{"command": "ls -la", "timeoutMs": 30000}
//
// of at most MaxRequest bytes. The agent answers with frames: a type byte,
// a big-endian uint32 length and at most MaxFrame bytes of payload:
//
//	1 stdout   bytes the command wrote to its standard output
//	2 stderr   bytes the command wrote to its standard error
//	3 exit     int32 exit code (big-endian), then a flags byte:
//	           1 timed out, 2 cancelled, 4 OOM kill, 8 pids limit
//	           hit (while the command ran, in the agent's cgroups);
//	           always the last frame
//	4 error    a message: the request was refused or the command could
//	           not start; the agent closes the connection after it
//
// Any byte the client sends after the request, or the client closing the
// connection, cancels the command: the agent kills it and still sends the
// exit frame when it can.
//
// # Standard input
//
// A command's standard input is empty unless the request asks for it with
// "stdin": true. Such a command runs until it exits, is cancelled, or its
// timeout passes (timeoutMs 0: none); a long-lived program the engine
// talks to, such as an MCP server on stdio. After the request line the
// client sends frames in the answer's format:
//
//	5 stdin      bytes for the command's standard input
//	6 stdin end  (empty) closes the command's standard input
//	7 cancel     (empty) cancels the command
//
// and the connection's end cancels it too, as does any other frame. The
// agent keeps what the command has not read yet, up to MaxStdinQueue
// bytes; a client that sends more cancels the command.
//
// # File operations
//
// A request with "op" set works on the sandbox's workspace instead of
// running a command, for providers that have no host directory to read
// (Kubernetes): "list", "stat", "read", "write" and "zip", with "path"
// (as sandbox.Files takes it) and, for "read", "max" (0: no bound; the
// agent answers too_large past it). The agent serves them with
// sandbox.DirFiles on its work directory, so its rules on links and
// special files hold there too. It answers with
//
//	8 data   the operation's output: the JSON of a FileInfo ("stat") or
//	         of a list of them ("list"), the file's bytes ("read"), the
//	         ZIP archive ("zip"); any number of frames
//	9 done   (empty) the operation succeeded; always the last frame
//	4 error  the JSON {"kind": ..., "error": ...}; kind is one of
//	         not_found, invalid_path, too_large, read_only or empty
//
// "read" sends a first data frame with the file's FileInfo as JSON before
// its bytes. "write" sends the file's bytes after the request as stdin
// frames ending with a stdin end frame, at most MaxWrite bytes, and the
// agent replaces the file atomically once it has them all.
//
// # Background processes
//
// A request with "op" set to one of these works on the sandbox's
// background processes (sandbox.Process): processes that outlive the
// connection that started them, until they exit, are stopped or the
// agent ends. They answer as file operations do (data frames of JSON,
// then done; or an error frame with a kind):
//
//	proc_start  "command": started through the persistent shell, which
//	            restores the state the last command saved and saves
//	            none; answers the sandbox.Process. too_many when
//	            sandbox.MaxProcesses run already
//	proc_list   answers every process kept, oldest first
//	proc_read   "proc", "offset", "max": answers a sandbox.ProcessOutput
//	            of the process's output (standard output and error as
//	            they came; the last sandbox.ProcessOutputKept bytes are
//	            kept)
//	proc_write  "proc", "end": stdin frames up to a stdin end frame, as
//	            for "write", go to the process's standard input; with
//	            "end" it is closed after them. process_ended once it
//	            ended
//	proc_stop   "proc": kills it and its session; answers the process
//
// An unknown "proc" is no_process.
//
// # Ports
//
// A request with "op" "dial" and "port" connects to that TCP port on
// the sandbox's loopback interface (127.0.0.1, then ::1), from inside
// the sandbox's network namespace: how the engine reaches a server a
// process of the sandbox runs (preview links), with no network
// interface of the sandbox's. The agent answers a done frame once it is
// connected, or an error frame with the kind port_closed when nothing
// listens there; after the done frame the connection carries the TCP
// stream's bytes as they are, both ways, without frames. Either side's
// end of sending (a half close) is passed on to the other; the
// connection ends when both ended, or when the agent does.
//
// # Terminals
//
// A request with "op" "pty", "cols" and "rows" starts an interactive
// shell on a new pseudo-terminal of that size (L1): the configured
// shell, which restores the persistent shell's state and saves it after
// each command line and when it ends (sandbox.InteractiveRC), in a
// session of its own. The agent answers a done frame once it runs, then
// stdout frames of what the terminal shows, and an exit frame when the
// shell ends. The client sends stdin frames of keystrokes and
//
//	10 resize  cols and rows, two big-endian uint16
//
// A cancel frame, any other frame or the connection's end hangs the
// terminal up: its processes get SIGHUP, and SIGKILL two seconds later.
//
// # Metrics
//
// A request with "op" "metrics" alone reads what the sandbox uses now
// (L4): its cgroups as the agent sees its own (cgroup v1 or v2 under
// /sys/fs/cgroup), and the disk its workspace's and shell state's files
// take. The agent answers a sandbox.Metrics as JSON in data frames, then
// done. CPUPercent and DiskLimitBytes are the engine's to fill in. Like
// every answer, the figures are the sandbox's word: they are for
// display, and no limit is enforced from them.
//
// # Over TCP
//
// An agent that listens on TCP (a Kubernetes pod's, reached over the
// cluster's network) first proves to the client, and the client to it,
// that both hold the sandbox's secret token, before the request line:
//
//	client: 32 random bytes Cc
//	agent:  32 random bytes Ca, then HMAC-SHA256(token, "agent" || Cc)
//	client: HMAC-SHA256(token, "client" || Ca), then the request line
//
// Neither side sends anything that depends on the token before it has
// seen the other's proof, so a pod that took over a deleted sandbox's
// address learns neither the token nor the command. The connection is
// not encrypted: the cluster's network must be trusted not to be read
// (or encrypted by the cluster, as a service mesh does).
//
// # Over a Unix socket
//
// An agent with a token that serves a Unix socket in the sandbox (bwrap's
// namespace, a Docker container) proves itself alone, with no round trip
// before the request: what the sandbox could learn from the client, the
// command, it can run anyway, but the engine must not take a process of
// the sandbox that replaced the socket for the agent (T3):
//
//	client: 32 random bytes Cc, the token's ID (16 bytes: HMAC-SHA256(token,
//	        "id"), which tells nothing of the token), then the request
//	agent:  HMAC-SHA256(token, "agent-unix" || Cc), then the answer
//
// An agent whose token has another ID closes the connection without
// reading further (a client with a stale token runs nothing); the client
// trusts no byte of the answer before the proof.
package agent

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/flowbox/flowbox/sandbox"
)

// Bounds of the protocol.
const (
	// MaxRequest bounds the request line, newline included. The kernel
	// refuses a single argument over 128 KiB anyway.
	MaxRequest = 1 << 20
	// MaxFrame bounds a frame's payload.
	MaxFrame = 32 << 10
	// MaxStdinQueue bounds the input the agent holds for a command that
	// has not read it yet.
	MaxStdinQueue = 1 << 20
	// MaxWrite bounds a file a "write" operation replaces.
	MaxWrite = 256 << 20
)

// Frame types.
const (
	frameStdout byte = 1
	frameStderr byte = 2
	frameExit   byte = 3
	frameError  byte = 4
	// From the client, for a command with standard input.
	frameStdin    byte = 5
	frameStdinEnd byte = 6
	frameCancel   byte = 7
	// File operations.
	frameData byte = 8
	frameDone byte = 9
	// Terminals, from the client.
	frameResize byte = 10
)

// File operations (the request's "op").
const (
	opList  = "list"
	opStat  = "stat"
	opRead  = "read"
	opWrite = "write"
	opZip   = "zip"
)

// Background process operations (the request's "op").
const (
	opProcStart = "proc_start"
	opProcList  = "proc_list"
	opProcRead  = "proc_read"
	opProcWrite = "proc_write"
	opProcStop  = "proc_stop"
)

// opDial connects to a port in the sandbox (see Ports); opPTY starts a
// terminal (see Terminals); opMetrics reads what the sandbox uses (see
// Metrics).
const (
	opDial    = "dial"
	opPTY     = "pty"
	opMetrics = "metrics"
)

// MaxTerminalSize bounds a terminal's columns and rows.
const MaxTerminalSize = 1000

func isProcOp(op string) bool {
	switch op {
	case opProcStart, opProcList, opProcRead, opProcWrite, opProcStop:
		return true
	}
	return false
}

// fileError is the error frame's payload of a file operation.
type fileError struct {
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error"`
}

// The kinds of fileError, each a sentinel of package sandbox.
var errorKinds = []struct {
	kind string
	err  error
}{
	{"not_found", sandbox.ErrNotFound},
	{"invalid_path", sandbox.ErrInvalidPath},
	{"too_large", sandbox.ErrTooLarge},
	{"read_only", sandbox.ErrReadOnly},
	{"too_many", sandbox.ErrTooManyProcesses},
	{"no_process", sandbox.ErrNoProcess},
	{"process_ended", sandbox.ErrProcessEnded},
	{"port_closed", sandbox.ErrPortClosed},
}

// Exit frame flags.
const (
	flagTimedOut byte = 1 << iota
	flagCancelled
	flagOOMKilled
	flagPidsLimited
)

// cancelByte is what the client sends to cancel; any byte does.
const cancelByte = 'c'

// Errors of the client.
var (
	// ErrNotListening: nothing listens at the socket's path (missing, or
	// a socket nobody accepts on). The agent may still be starting.
	ErrNotListening = errors.New("the sandbox's agent is not listening")
	// ErrNotSocket: the path is not a socket (a link, a file, ...); the
	// client refuses it.
	ErrNotSocket = errors.New("the agent's socket path is not a socket")
	// ErrProtocol: the agent's answer breaks the protocol.
	ErrProtocol = errors.New("the sandbox's agent broke the protocol")
	// ErrRefused: the agent refused the request or could not start the
	// command.
	ErrRefused = errors.New("the sandbox's agent refused the command")
)

// Request is one command for the agent.
type Request struct {
	Command string
	// Timeout is enforced by the agent: when it passes, the command and
	// every process it started are killed. Zero means none.
	Timeout time.Duration
	// Stdin, when set, is the command's standard input, sent as it is
	// read; its end closes the command's input. Exec does not wait for a
	// Read in progress when it returns: the caller ends Stdin then (for
	// an io.Pipe, by closing it).
	Stdin io.Reader
}

// Result is how a command ended.
type Result struct {
	// ExitCode is the shell's exit code; 128+n when signal n killed it.
	ExitCode int
	TimedOut bool
	// Cancelled: the client cancelled the command before it ended.
	Cancelled bool
	// OOMKilled and PidsLimited: the agent's cgroups counted an OOM kill
	// or a fork refused at the pids limit while the command ran (see
	// sandbox.ExecResult). Like the rest of the answer, they are the
	// sandbox's word: a command that replaced the agent can set them.
	OOMKilled   bool
	PidsLimited bool
}

// wireRequest is the request line.
type wireRequest struct {
	Command   string `json:"command,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	Stdin     bool   `json:"stdin,omitempty"`
	// File operations.
	Op   string `json:"op,omitempty"`
	Path string `json:"path,omitempty"`
	Max  int64  `json:"max,omitempty"`
	// Skip: for "zip", directories relative to Path to leave out, the
	// mounts the engine adds from the host (E4). An agent that ignores it
	// sends them, and the engine drops them.
	Skip []string `json:"skip,omitempty"`
	// Background processes: the process, where its output is read from,
	// and whether a write ends its input.
	Proc   string `json:"proc,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	End    bool   `json:"end,omitempty"`
	// Port: for "dial", the TCP port to connect to.
	Port int `json:"port,omitempty"`
	// Cols and Rows: for "pty", the terminal's size.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
}

func frameHeader(typ byte, n int) [5]byte {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(n))
	return h
}

// readFrame reads one frame into buf, which must hold MaxFrame bytes.
func readFrame(r io.Reader, buf []byte) (typ byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: a frame of %d bytes, over the bound of %d", ErrProtocol, n, MaxFrame)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}

func exitPayload(r Result) []byte {
	p := make([]byte, 5)
	binary.BigEndian.PutUint32(p, uint32(int32(r.ExitCode)))
	if r.TimedOut {
		p[4] |= flagTimedOut
	}
	if r.Cancelled {
		p[4] |= flagCancelled
	}
	if r.OOMKilled {
		p[4] |= flagOOMKilled
	}
	if r.PidsLimited {
		p[4] |= flagPidsLimited
	}
	return p
}

func parseExit(p []byte) (Result, error) {
	if len(p) != 5 {
		return Result{}, fmt.Errorf("%w: an exit frame of %d bytes, want 5", ErrProtocol, len(p))
	}
	return Result{
		ExitCode:    int(int32(binary.BigEndian.Uint32(p))),
		TimedOut:    p[4]&flagTimedOut != 0,
		Cancelled:   p[4]&flagCancelled != 0,
		OOMKilled:   p[4]&flagOOMKilled != 0,
		PidsLimited: p[4]&flagPidsLimited != 0,
	}, nil
}

// printable makes a message from the agent safe to log: valid UTF-8, no
// control characters, at most 300 bytes.
func printable(p []byte) string {
	const max = 300
	s := strings.ToValidUTF8(string(p[:min(len(p), max)]), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// MinToken is the shortest token an agent accepts.
const MinToken = 16

// NewToken makes a sandbox's token: 32 random bytes, in hex.
func NewToken() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return []byte(hex.EncodeToString(b))
}

// nonceSize is the size of the handshake's random challenges and proofs.
const nonceSize = 32

// tokenIDSize is the size of a token's ID (see Over a Unix socket).
const tokenIDSize = 16

// tokenID names token without telling anything of it.
func tokenID(token []byte) []byte { return proof(token, "id", nil)[:tokenIDSize] }

// proof is one side's answer to the other's challenge (see Over TCP).
func proof(token []byte, side string, challenge []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(side))
	m.Write(challenge)
	return m.Sum(nil)
}

// ErrAuth: the other end of a connection does not hold the sandbox's
// token.
var ErrAuth = errors.New("the sandbox's agent failed authentication")
