// Package agent is the exec agent: a small server that runs inside a
// sandbox as its main process and runs the engine's commands there, and
// the engine's client for it. A command costs a connection to a Unix
// socket and a fork instead of a round trip through a container runtime.
//
// The agent runs every command through the persistent shell
// (sandbox.ShellArgv) in a session of its own, streams its output back and,
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
package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
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
)

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
	Command   string `json:"command"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	Stdin     bool   `json:"stdin,omitempty"`
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
