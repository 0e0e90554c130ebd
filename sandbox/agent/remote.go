package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// handshakeTimeout bounds the TCP handshake.
const handshakeTimeout = 10 * time.Second

// DialTCP connects to an agent serving on TCP at addr ("10.0.0.7:7070")
// and runs the handshake with token (see Over TCP). Nothing listening
// there is ErrNotListening; an agent that does not hold token is ErrAuth.
func DialTCP(ctx context.Context, addr string, token []byte) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("dial %s: %w", addr, ErrNotListening)
		}
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if err := clientHandshake(ctx, c, token); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &Conn{c: c}, nil
}

// clientHandshake runs the client's side of the handshake.
func clientHandshake(ctx context.Context, c net.Conn, token []byte) error {
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	cc := make([]byte, nonceSize)
	_, _ = rand.Read(cc)
	if _, err := c.Write(cc); err != nil {
		return fmt.Errorf("send the challenge: %w", err)
	}
	answer := make([]byte, nonceSize+sha256.Size)
	if _, err := io.ReadFull(c, answer); err != nil {
		if errors.Is(err, io.EOF) {
			// An agent closes a connection it cannot serve yet.
			return fmt.Errorf("read the agent's proof: %w", ErrNotListening)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// An answer, but shorter than any proof: not the agent.
			return fmt.Errorf("read the agent's proof: %w: %w", ErrAuth, err)
		}
		return fmt.Errorf("read the agent's proof: %w", err)
	}
	ca, got := answer[:nonceSize], answer[nonceSize:]
	if !hmac.Equal(got, proof(token, "agent", cc)) {
		return ErrAuth
	}
	if _, err := c.Write(proof(token, "client", ca)); err != nil {
		return fmt.Errorf("send the proof: %w", err)
	}
	return nil
}

// Files is sandbox.Files served by a sandbox's agent (see File
// operations), for providers with no host directory of the workspace.
// Dial returns a new connection to the agent for each operation.
type Files struct {
	Dial func(ctx context.Context) (*Conn, error)
}

var _ sandbox.Files = Files{}
var _ sandbox.ZipSkipper = Files{}

// op sends a file operation on a new connection and returns the
// connection's reader, positioned at the answer's first frame. With
// upload set, its bytes follow the request.
func (f Files) op(ctx context.Context, req wireRequest, upload []byte) (*Conn, *bufio.Reader, error) {
	conn, err := f.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	line, err := json.Marshal(req)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	// ctx's end closes the connection, which ends the reads too.
	conn.stop = context.AfterFunc(ctx, func() { conn.c.Close() })
	var buf bytes.Buffer
	buf.Write(line)
	buf.WriteByte('\n')
	if req.Op == opWrite || req.Op == opProcWrite {
		for p := upload; ; {
			chunk := p[:min(len(p), MaxFrame)]
			h := frameHeader(frameStdin, len(chunk))
			buf.Write(h[:])
			buf.Write(chunk)
			p = p[len(chunk):]
			if len(p) == 0 {
				break
			}
		}
		h := frameHeader(frameStdinEnd, 0)
		buf.Write(h[:])
	}
	_ = conn.c.SetWriteDeadline(time.Now().Add(writeTimeout + time.Duration(len(upload)>>20)*time.Second))
	_, err = buf.WriteTo(conn.c)
	_ = conn.c.SetWriteDeadline(time.Time{})
	if err != nil {
		err = conn.unsent(err)
		conn.Close()
		return nil, nil, ctxOr(ctx, fmt.Errorf("agent %s: send the request: %w", req.Op, err))
	}
	r, err := conn.answer()
	if err != nil {
		conn.Close()
		return nil, nil, ctxOr(ctx, fmt.Errorf("agent %s: %w", req.Op, err))
	}
	return conn, r, nil
}

// ctxOr is ctx's error when it ended, else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// answer reads an answer's frames to its end, giving data frames to
// onData: nil at the done frame, the agent's error at an error frame.
func answer(ctx context.Context, op string, r io.Reader, onData func([]byte) error) error {
	buf := make([]byte, MaxFrame)
	for {
		typ, p, err := readFrame(r, buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return ctxOr(ctx, fmt.Errorf("agent %s: read the answer: %w", op, err))
		}
		switch typ {
		case frameData:
			if err := onData(p); err != nil {
				return err
			}
		case frameDone:
			return nil
		case frameError:
			return remoteError(p)
		default:
			return fmt.Errorf("agent %s: %w: unknown frame type %d", op, ErrProtocol, typ)
		}
	}
}

// remoteError turns an error frame of a file operation into an error
// that matches the sandbox sentinel its kind names.
func remoteError(p []byte) error {
	var fe fileError
	if err := json.Unmarshal(p, &fe); err != nil {
		return fmt.Errorf("%w: %s", ErrRefused, printable(p))
	}
	msg := printable([]byte(fe.Error))
	for _, k := range errorKinds {
		if fe.Kind == k.kind {
			return &remoteErr{msg: msg, kind: k.err}
		}
	}
	return errors.New(msg)
}

// remoteErr is the agent's message, matching a sentinel of package
// sandbox.
type remoteErr struct {
	msg  string
	kind error
}

func (e *remoteErr) Error() string        { return e.msg }
func (e *remoteErr) Is(target error) bool { return target == e.kind }

// collect runs an operation whose answer is small, and returns its data.
func (f Files) collect(ctx context.Context, req wireRequest, limit int) ([]byte, error) {
	return f.collectAfter(ctx, req, nil, limit)
}

// collectAfter is collect with upload's bytes sent after the request.
func (f Files) collectAfter(ctx context.Context, req wireRequest, upload []byte, limit int) ([]byte, error) {
	conn, r, err := f.op(ctx, req, upload)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var data []byte
	err = answer(ctx, req.Op, r, func(p []byte) error {
		if len(data)+len(p) > limit {
			return fmt.Errorf("agent %s: %w: an answer over %d bytes", req.Op, ErrProtocol, limit)
		}
		data = append(data, p...)
		return nil
	})
	return data, err
}

// maxListing bounds a listing's JSON.
const maxListing = 64 << 20

func (f Files) List(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	data, err := f.collect(ctx, wireRequest{Op: opList, Path: path}, maxListing)
	if err != nil {
		return nil, err
	}
	var entries []sandbox.FileInfo
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("agent list: %w: %v", ErrProtocol, err)
	}
	return entries, nil
}

func (f Files) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	data, err := f.collect(ctx, wireRequest{Op: opStat, Path: path}, MaxFrame)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	var info sandbox.FileInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return sandbox.FileInfo{}, fmt.Errorf("agent stat: %w: %v", ErrProtocol, err)
	}
	return info, nil
}

// Open streams a regular file. The reader ends with an error when the
// agent's answer does.
func (f Files) Open(ctx context.Context, path string) (io.ReadCloser, sandbox.FileInfo, error) {
	return f.open(ctx, path, 0)
}

func (f Files) open(ctx context.Context, path string, max int64) (io.ReadCloser, sandbox.FileInfo, error) {
	conn, r, err := f.op(ctx, wireRequest{Op: opRead, Path: path, Max: max}, nil)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	// The first data frame is the file's FileInfo.
	var info sandbox.FileInfo
	got := false
	err = answer(ctx, opRead, r, func(p []byte) error {
		if err := json.Unmarshal(p, &info); err != nil {
			return fmt.Errorf("agent read: %w: %v", ErrProtocol, err)
		}
		got = true
		return errStop
	})
	if !errors.Is(err, errStop) {
		conn.Close()
		if err == nil && !got {
			err = fmt.Errorf("agent read: %w: no file description", ErrProtocol)
		}
		return nil, sandbox.FileInfo{}, err
	}
	return &fileReader{ctx: ctx, conn: conn, r: r}, info, nil
}

// errStop stops answer after the frame that was wanted.
var errStop = errors.New("stop")

// fileReader reads a file's data frames.
type fileReader struct {
	ctx  context.Context
	conn *Conn
	r    *bufio.Reader
	buf  []byte // what is left of the last frame
	last []byte // the last frame's storage
	err  error
}

func (fr *fileReader) Read(p []byte) (int, error) {
	for len(fr.buf) == 0 {
		if fr.err != nil {
			return 0, fr.err
		}
		if fr.last == nil {
			fr.last = make([]byte, MaxFrame)
		}
		fr.err = answer(fr.ctx, opRead, fr.r, func(d []byte) error {
			fr.buf = append(fr.last[:0], d...)
			return errStop
		})
		switch {
		case errors.Is(fr.err, errStop):
			fr.err = nil
		case fr.err == nil:
			fr.err = io.EOF
		}
	}
	n := copy(p, fr.buf)
	fr.buf = fr.buf[n:]
	return n, nil
}

func (fr *fileReader) Close() error { return fr.conn.Close() }

func (f Files) ReadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	rc, _, err := f.open(ctx, path, max)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (f Files) WriteFile(ctx context.Context, path string, data []byte) error {
	if len(data) > MaxWrite {
		return fmt.Errorf("write %s: %w: %d bytes, over the bound of %d", path, sandbox.ErrTooLarge, len(data), MaxWrite)
	}
	conn, r, err := f.op(ctx, wireRequest{Op: opWrite, Path: path}, data)
	if err != nil {
		return err
	}
	defer conn.Close()
	return answer(ctx, opWrite, r, func([]byte) error {
		return fmt.Errorf("agent write: %w: data in the answer", ErrProtocol)
	})
}

func (f Files) Zip(ctx context.Context, path string, w io.Writer) error {
	return f.ZipSkipping(ctx, path, w, nil)
}

// ZipSkipping implements sandbox.ZipSkipper: the agent leaves out the
// mounts, which the engine adds from their host directories (E4).
// An agent older than the field refuses the request as malformed before
// it sends anything; it is asked again without it, and the engine drops
// the mounts from its archive.
func (f Files) ZipSkipping(ctx context.Context, path string, w io.Writer, skip []string) error {
	sent := false
	err := f.zip(ctx, wireRequest{Op: opZip, Path: path, Skip: skip}, func(p []byte) error {
		sent = true
		_, err := w.Write(p)
		return err
	})
	if len(skip) > 0 && !sent && errors.Is(err, ErrRefused) && strings.Contains(err.Error(), `unknown field "skip"`) {
		err = f.zip(ctx, wireRequest{Op: opZip, Path: path}, func(p []byte) error {
			_, err := w.Write(p)
			return err
		})
	}
	return err
}

func (f Files) zip(ctx context.Context, req wireRequest, data func([]byte) error) error {
	conn, r, err := f.op(ctx, req, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	return answer(ctx, opZip, r, data)
}
