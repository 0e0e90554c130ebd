package skills

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ZipDir returns a ZIP archive of dir with its files inside one top-level
// folder named as dir, as Install accepts. It keeps executable bits and
// refuses symlinks and special files, which Install would refuse too.
func ZipDir(dir string) ([]byte, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	top := filepath.Base(dir)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(filepath.Join(top, rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			_, err := zw.CreateHeader(&zip.FileHeader{Name: name + "/", Modified: info.ModTime()})
			return err
		case !info.Mode().IsRegular():
			return fmt.Errorf("zip %s: %s is a %s; a skill archive holds only directories and regular files", dir, rel, kind(info.Mode()))
		}
		h, err := zip.FileInfoHeader(info)
		if err != nil {
			return err
		}
		h.Name, h.Method = name, zip.Deflate
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
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
