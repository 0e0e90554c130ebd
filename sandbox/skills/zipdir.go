package skills

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ZipDir returns a ZIP archive of dir with its files inside one top-level
// folder named as dir, as Install accepts. It keeps executable bits and
// refuses symlinks and special files, which Install would refuse too.
func ZipDir(dir string) ([]byte, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return ZipFS(os.DirFS(filepath.Dir(dir)), filepath.Base(dir))
}

// ZipFS is ZipDir for the directory top of fsys. A file system that keeps
// no modes (an embedded one: every file 0444) still gives the files under
// scripts/ their executable bit, as the Agent Skills format means them.
func ZipFS(fsys fs.FS, top string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := fs.WalkDir(fsys, top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, top), "/")
		switch {
		case d.IsDir():
			_, err := zw.CreateHeader(&zip.FileHeader{Name: p + "/", Modified: info.ModTime()})
			return err
		case !info.Mode().IsRegular():
			return fmt.Errorf("zip %s: %s is a %s; a skill archive holds only directories and regular files", top, rel, kind(info.Mode()))
		}
		h, err := zip.FileInfoHeader(info)
		if err != nil {
			return err
		}
		h.Name, h.Method = path.Clean(p), zip.Deflate
		if strings.HasPrefix(rel, "scripts/") && info.Mode()&0o111 == 0 {
			h.SetMode(0o755)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
