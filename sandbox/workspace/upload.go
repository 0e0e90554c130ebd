package workspace

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// ErrQuota matches every *QuotaError.
var ErrQuota = errors.New("quota exceeded")

// What a QuotaError is about.
const (
	QuotaFile = "file" // one upload's size, Config.MaxFileBytes
	QuotaChat = "chat" // a chat's files together, Config.MaxChatBytes
)

// QuotaError is an upload refused by a limit. It matches ErrQuota and
// sandbox.ErrTooLarge.
type QuotaError struct {
	// What is QuotaFile or QuotaChat.
	What string
	// Name is the file's name.
	Name string
	// Limit is the limit passed, in bytes.
	Limit int64
	// Size is the file's size when it was known in advance (Fits); 0 when
	// the upload was cut as it passed the limit.
	Size int64
	// Used is what the chat's other files took (QuotaChat only).
	Used int64
}

func (e *QuotaError) Error() string {
	if e.What == QuotaFile {
		if e.Size > 0 {
			return fmt.Sprintf("file too large: %s is %s, the limit per file is %s", e.Name, HumanSize(e.Size), HumanSize(e.Limit))
		}
		return fmt.Sprintf("file too large: %s is larger than %s, the limit per file", e.Name, HumanSize(e.Limit))
	}
	size := ""
	if e.Size > 0 {
		size = " (" + HumanSize(e.Size) + ")"
	}
	return fmt.Sprintf("not enough space in this chat for %s%s: its files already take %s of %s (uploads and intermediate files together); delete files it no longer needs and try again",
		e.Name, size, HumanSize(e.Used), HumanSize(e.Limit))
}

// Is makes errors.Is(err, ErrQuota) and errors.Is(err, sandbox.ErrTooLarge)
// hold.
func (e *QuotaError) Is(target error) bool {
	return target == ErrQuota || target == sandbox.ErrTooLarge
}

// File is an upload as saved.
type File struct {
	// Name is the name it was saved under: cleaned, and numbered when the
	// name was taken ("data (1).csv").
	Name string `json:"name"`
	// Path is relative to uploads.
	Path string `json:"path"`
	// SandboxPath is where the sandbox sees it.
	SandboxPath string `json:"sandboxPath"`
	Size        int64  `json:"size"`
}

// maxCollisions bounds the numbered names tried for one upload.
const maxCollisions = 10000

// copyBuf is the unit in which uploads are written and their bytes
// reserved against the chat's quota.
const copyBuf = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// Save streams r into the chat's uploads, in dir (relative to uploads, or
// absolute as the sandbox sees it; "" for uploads itself, created when
// missing) under name cleaned by CleanName. A taken name is numbered
// ("data (1).csv"); nothing existing is ever replaced. The file appears
// complete or not at all. Limits are enforced while streaming: the byte
// that would pass one is never written, the partial file is removed and
// the error is a *QuotaError.
func (s *Store) Save(ctx context.Context, scope sandbox.Scope, dir, name string, r io.Reader) (File, error) {
	if err := checkScope(scope); err != nil {
		return File{}, err
	}
	clean, err := CleanName(name)
	if err != nil {
		return File{}, err
	}
	relDir, err := relPath(Uploads, dir)
	if err != nil {
		return File{}, err
	}
	// In flight from here: a rewind of the chat's files waits for no
	// upload, and an upload waits for a rewind in progress, so that it
	// lands in the files the chat has after it.
	tmp := rand.Text() + ".part"
	q, err := s.acquire(ctx, scope.SandboxID(), s.chatDir(scope.SandboxID()), tmp)
	if err != nil {
		return File{}, err
	}
	defer s.release(scope.SandboxID(), q, tmp)
	chatDir, err := s.ensure(scope)
	if err != nil {
		return File{}, err
	}
	root, err := s.openArea(scope.SandboxID(), Uploads)
	if err != nil {
		return File{}, fileErr("save into", Uploads, relDir, err)
	}
	defer root.Close()
	if err := s.mkdirAll(root, relDir); err != nil {
		if full(err) {
			return File{}, s.fullErr(clean)
		}
		return File{}, fileErr("save into", Uploads, relDir, err)
	}
	// The directory is held by its descriptor from here on: whatever the
	// sandbox renames or swaps meanwhile, the file lands in it.
	target, err := root.OpenFile(relDir, dirFlags, 0)
	if err != nil {
		return File{}, fileErr("save into", Uploads, relDir, err)
	}
	defer target.Close()
	stagingPath := filepath.Join(chatDir, stagingDir)
	staging, err := os.Open(stagingPath)
	if err != nil {
		return File{}, fmt.Errorf("save %s: open the staging directory: %w", clean, err)
	}
	defer staging.Close()

	tmpPath := filepath.Join(stagingPath, tmp)
	f, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.fileMode())
	if err != nil {
		if full(err) {
			return File{}, s.fullErr(clean)
		}
		return File{}, fmt.Errorf("save %s: %w", clean, err)
	}
	defer os.Remove(tmpPath) // once linked, the name in uploads keeps the file
	size, err := s.copy(ctx, q, f, r, clean)
	if err == nil {
		err = f.Chmod(s.fileMode()) // whatever the umask
	}
	if err == nil {
		// The file is made durable only once its chat's owner is.
		err = s.ownerDurable(ctx, scope.SandboxID())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		q.unreserve(size)
		if errors.Is(err, ErrQuota) || ctx.Err() != nil {
			return File{}, err
		}
		if full(err) {
			return File{}, s.fullErr(clean)
		}
		return File{}, fmt.Errorf("save %s: %w", clean, err)
	}
	final, err := claim(staging, tmp, target, clean)
	if err != nil {
		q.unreserve(size)
		if errors.Is(err, fs.ErrNotExist) {
			return File{}, fmt.Errorf("save %s: %w: the chat's files were deleted while it was received; upload it again", clean, sandbox.ErrNotFound)
		}
		if full(err) {
			return File{}, s.fullErr(clean)
		}
		return File{}, fileErr("save "+clean+" into", Uploads, relDir, err)
	}
	rel := final
	if relDir != "." {
		rel = relDir + "/" + final
	}
	return File{Name: final, Path: rel, SandboxPath: sandboxPath(Uploads, rel), Size: size}, nil
}

// full reports whether err says the chat's disk is full (ChatDisk), or
// its files' quota in the checkpoint pool reached: what the sandbox wrote
// since the last measure, or the files' checkpoints, took the rest.
// Creating a file or a directory meets it as well as writing.
func full(err error) bool { return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) }

// fullErr is the quota error of an upload that met a full disk.
func (s *Store) fullErr(name string) error {
	return &QuotaError{What: QuotaChat, Name: name, Limit: s.maxChat, Used: s.maxChat}
}

// mkdirAll creates the missing directories of rel inside root, each with
// exactly the area's mode.
func (s *Store) mkdirAll(root *os.Root, rel string) error {
	if rel == "." {
		return nil
	}
	prefix := ""
	for _, seg := range strings.Split(rel, "/") {
		if prefix == "" {
			prefix = seg
		} else {
			prefix += "/" + seg
		}
		err := root.Mkdir(prefix, s.areaMode())
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		// Chmod on the descriptor: Root.Chmod could act on a link swapped
		// in meanwhile.
		d, err := root.OpenFile(prefix, dirFlags, 0)
		if err != nil {
			return err
		}
		err = d.Chmod(s.areaMode())
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// claim links the staged file into dir under the first free candidate of
// name. linkat fails on any existing entry, so concurrent uploads of one
// name each get their own, and nothing is replaced.
func claim(staging *os.File, tmp string, dir *os.File, name string) (string, error) {
	for n := 0; n < maxCollisions; n++ {
		c := candidate(name, n)
		err := linkAt(staging, tmp, dir, c)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: %d files are already named like %s; delete some or rename the file", sandbox.ErrInvalidPath, maxCollisions, name)
}

// copy streams src into dst, counting against the file's and the chat's
// limits before every write. It returns the bytes reserved (and written or
// about to be), which the caller gives back if the file is not kept.
func (s *Store) copy(ctx context.Context, q *chatQuota, dst io.Writer, src io.Reader, name string) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if s.maxFile >= 0 && written+int64(n) > s.maxFile {
				return written, &QuotaError{What: QuotaFile, Name: name, Limit: s.maxFile}
			}
			if err := s.reserve(ctx, q, int64(n), written, name); err != nil {
				if errors.Is(err, ErrQuota) {
					return 0, err // reserve gave the bytes back
				}
				return written, err
			}
			written += int64(n)
			if _, err := dst.Write(buf[:n]); err != nil {
				return written, err
			}
		}
		if rerr == io.EOF {
			return written, nil
		}
		if rerr != nil {
			return written, fmt.Errorf("read the upload: %w", rerr)
		}
	}
}

// chatQuota is a chat's usage while uploads to it are in flight in this
// process: measured once by a walk, then kept by reservations, so that
// concurrent uploads see each other's bytes.
type chatQuota struct {
	dir string
	// staging names the staging files of the uploads in flight; guarded
	// by Store.mu.
	staging map[string]bool

	mu       sync.Mutex
	measured bool
	used     int64
}

// acquire counts an upload to chat id in flight, once no restore of the
// chat's files runs.
func (s *Store) acquire(ctx context.Context, id, dir, tmp string) (*chatQuota, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.restoring[id] != nil {
		done := s.restoring[id]
		s.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			s.mu.Lock()
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	q := s.quotas[id]
	if q == nil {
		q = &chatQuota{dir: dir, staging: map[string]bool{}}
		s.quotas[id] = q
	}
	q.staging[tmp] = true
	return q, nil
}

// restoreAlone marks a restore of chat id's files as running, while no
// upload to it is in flight (sandbox.ErrRewindBusy otherwise); uploads
// that begin meanwhile wait for done.
func (s *Store) restoreAlone(id string) (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quotas[id] != nil {
		return nil, fmt.Errorf("%w: an upload to the chat is being received; try again when it has finished", sandbox.ErrRewindBusy)
	}
	ch := make(chan struct{})
	s.restoring[id] = ch
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.restoring, id)
		close(ch)
	}, nil
}

// release forgets the measure with the chat's last upload in flight: the
// next one measures again and sees what the sandbox wrote meanwhile.
func (s *Store) release(id string, q *chatQuota, tmp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(q.staging, tmp)
	if len(q.staging) == 0 {
		delete(s.quotas, id)
	}
}

// receiving reports whether tmp is the staging file of an upload in
// flight in this process.
func (s *Store) receiving(q *chatQuota, tmp string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return q.staging[tmp]
}

// reserve takes n more bytes of the chat's quota for an upload that has
// reserved mine already; refusing, it gives mine back.
func (s *Store) reserve(ctx context.Context, q *chatQuota, n, mine int64, name string) error {
	if s.maxChat < 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.measured {
		used, err := s.usage(ctx, q.dir, q)
		if err != nil {
			return fmt.Errorf("measure the chat's files: %w", err)
		}
		q.used, q.measured = used, true
	}
	if q.used+n > s.maxChat {
		// The refused upload's bytes go back at once, under the same lock:
		// no other upload in flight is refused for them.
		q.used -= mine
		return &QuotaError{What: QuotaChat, Name: name, Limit: s.maxChat, Used: q.used}
	}
	q.used += n
	return nil
}

func (q *chatQuota) unreserve(n int64) {
	q.mu.Lock()
	q.used -= n
	q.mu.Unlock()
}

// usage sums the sizes of the regular files under the chat's uploads,
// intermediate and staging. With sweep (the uploads in flight), staging
// files that are none of theirs and have not been written for staleAfter
// (left by a crashed upload) are removed and not counted. Their age is
// read on the kernel's clock, as their modification times are.
func (s *Store) usage(ctx context.Context, chatDir string, sweep *chatQuota) (int64, error) {
	var total int64
	for _, name := range []string{string(Uploads), string(Intermediate), stagingDir} {
		root, err := os.OpenRoot(filepath.Join(chatDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		w := walker{root: root, budget: -1, visit: func(rel string, de fs.DirEntry) error {
			if !de.Type().IsRegular() {
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			if sweep != nil && name == stagingDir && time.Since(fi.ModTime()) > staleAfter && !s.receiving(sweep, rel) {
				_ = root.Remove(rel)
				return nil
			}
			total += fi.Size()
			return nil
		}}
		err = w.walk(ctx)
		root.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	return total, nil
}

// Usage is what the chat's files take on disk, in bytes: uploads,
// intermediate and unfinished uploads, by a walk.
func (s *Store) Usage(ctx context.Context, scope sandbox.Scope) (int64, error) {
	if err := checkScope(scope); err != nil {
		return 0, err
	}
	if err := s.attach(scope.SandboxID(), false); err != nil {
		return 0, fmt.Errorf("measure the chat's files: %w", err)
	}
	used, err := s.usage(ctx, s.chatDir(scope.SandboxID()), nil)
	if err != nil {
		return 0, fmt.Errorf("measure the chat's files: %w", err)
	}
	return used, nil
}

// Fits says, before an upload of a known size begins (a Content-Length),
// whether it would pass a limit, as the *QuotaError Save would return
// after reading that much. It reserves nothing: Save still enforces the
// limits while streaming.
func (s *Store) Fits(ctx context.Context, scope sandbox.Scope, name string, size int64) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	if s.maxFile >= 0 && size > s.maxFile {
		return &QuotaError{What: QuotaFile, Name: name, Limit: s.maxFile, Size: size}
	}
	if s.maxChat < 0 {
		return nil
	}
	used, ok := s.inflightUsage(scope.SandboxID())
	if !ok {
		var err error
		if used, err = s.Usage(ctx, scope); err != nil {
			return err
		}
	}
	if used+size > s.maxChat {
		return &QuotaError{What: QuotaChat, Name: name, Limit: s.maxChat, Size: size, Used: used}
	}
	return nil
}

// inflightUsage is the chat's usage as the uploads in flight keep it, when
// they have measured it.
func (s *Store) inflightUsage(id string) (int64, bool) {
	s.mu.Lock()
	q := s.quotas[id]
	s.mu.Unlock()
	if q == nil {
		return 0, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used, q.measured
}
