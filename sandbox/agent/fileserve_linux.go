package agent

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// authenticate runs the agent's side of the TCP handshake (see Over TCP).
func (s *server) authenticate(conn net.Conn, br *bufio.Reader) error {
	cc := make([]byte, nonceSize)
	if _, err := io.ReadFull(br, cc); err != nil {
		return fmt.Errorf("read the challenge: %w", err)
	}
	ca := make([]byte, nonceSize)
	_, _ = rand.Read(ca)
	_ = conn.SetWriteDeadline(time.Now().Add(requestTimeout))
	if _, err := conn.Write(append(ca, proof(s.cfg.Token, "agent", cc)...)); err != nil {
		return fmt.Errorf("send the proof: %w", err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(br, got); err != nil {
		return fmt.Errorf("read the client's proof: %w", err)
	}
	if !hmac.Equal(got, proof(s.cfg.Token, "client", ca)) {
		return ErrAuth
	}
	return nil
}

// prove runs the agent's side of the handshake on its Unix socket (see
// Over a Unix socket): a client with another token's ID gets nothing.
func (s *server) prove(conn net.Conn, br *bufio.Reader) error {
	hello := make([]byte, nonceSize+tokenIDSize)
	if _, err := io.ReadFull(br, hello); err != nil {
		return fmt.Errorf("read the challenge: %w", err)
	}
	if !hmac.Equal(hello[nonceSize:], tokenID(s.cfg.Token)) {
		return errors.New("another token's ID")
	}
	_ = conn.SetWriteDeadline(time.Now().Add(requestTimeout))
	_, err := conn.Write(proof(s.cfg.Token, "agent-unix", hello[:nonceSize]))
	_ = conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("send the proof: %w", err)
	}
	return nil
}

// fileOp serves a file operation on the work directory.
func (s *server) fileOp(ctx context.Context, req wireRequest, br *bufio.Reader, w *frameWriter) {
	files := sandbox.DirFiles{Dir: s.cfg.WorkDir}
	var err error
	switch req.Op {
	case opList:
		var entries []sandbox.FileInfo
		if entries, err = files.List(ctx, req.Path); err == nil {
			err = w.json(entries)
		}
	case opStat:
		var info sandbox.FileInfo
		if info, err = files.Stat(ctx, req.Path); err == nil {
			err = w.json(info)
		}
	case opRead:
		err = s.read(ctx, files, req, w)
	case opWrite:
		var data []byte
		if data, err = readUpload(br); err == nil {
			err = files.WriteFile(ctx, req.Path, data)
		}
	case opZip:
		err = files.ZipSkipping(ctx, req.Path, dataWriter{w}, req.Skip)
	}
	if err != nil {
		w.finish(frameError, fileErrorPayload(err))
		return
	}
	w.finish(frameDone, nil)
}

// read sends a regular file: its FileInfo, then its bytes, at most
// req.Max of them when it is set.
func (s *server) read(ctx context.Context, files sandbox.DirFiles, req wireRequest, w *frameWriter) error {
	f, info, err := files.Open(ctx, req.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	if req.Max > 0 && info.Size > req.Max {
		return fmt.Errorf("read %s: %w: %d bytes, over the bound of %d", req.Path, sandbox.ErrTooLarge, info.Size, req.Max)
	}
	if err := w.json(info); err != nil {
		return err
	}
	var r io.Reader = f
	if req.Max > 0 {
		// The file may grow while it is read.
		r = io.LimitReader(f, req.Max+1)
	}
	n, err := io.CopyBuffer(dataWriter{w}, r, make([]byte, MaxFrame))
	if err != nil {
		return fmt.Errorf("read %s: %w", req.Path, err)
	}
	if req.Max > 0 && n > req.Max {
		return fmt.Errorf("read %s: %w: it grew over the bound of %d while it was read", req.Path, sandbox.ErrTooLarge, req.Max)
	}
	return nil
}

// readUpload reads a "write" operation's bytes: stdin frames up to a
// stdin end frame, at most MaxWrite bytes.
func readUpload(r io.Reader) ([]byte, error) { return readFrames(r, MaxWrite) }

// readFrames reads stdin frames up to a stdin end frame, at most limit
// bytes of them.
func readFrames(r io.Reader, limit int) ([]byte, error) {
	buf := make([]byte, MaxFrame)
	var data []byte
	for {
		typ, p, err := readFrame(r, buf)
		if err != nil {
			return nil, fmt.Errorf("read the file's bytes: %w", err)
		}
		switch typ {
		case frameStdin:
			if len(data)+len(p) > limit {
				return nil, fmt.Errorf("write: %w: over %d bytes", sandbox.ErrTooLarge, limit)
			}
			data = append(data, p...)
		case frameStdinEnd:
			return data, nil
		default:
			return nil, fmt.Errorf("write: frame type %d before the end of the file's bytes", typ)
		}
	}
}

// fileErrorPayload is the error frame of a failed file operation.
func fileErrorPayload(err error) []byte {
	fe := fileError{Error: err.Error()}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			fe.Kind = k.kind
			break
		}
	}
	if fe.Kind == "" && errors.Is(err, syscall.EROFS) {
		fe.Kind = "read_only"
	}
	p, _ := json.Marshal(fe)
	if len(p) > MaxFrame {
		fe.Error = fe.Error[:MaxFrame/2]
		p, _ = json.Marshal(fe)
	}
	return p
}

// json sends v's JSON as data frames.
func (w *frameWriter) json(v any) error {
	p, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = dataWriter{w}.Write(p)
	return err
}

// dataWriter sends what is written to it as data frames.
type dataWriter struct{ w *frameWriter }

func (d dataWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxFrame)]
		if err := d.w.write(frameData, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}
