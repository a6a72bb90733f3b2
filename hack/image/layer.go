package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is the modification time of every file in the images built here, so that the same
// inputs give the same image digest.
var epoch = time.Unix(0, 0).UTC()

// entry is one file or directory of a layer.
type entry struct {
	mode     int64 // permission bits; a directory when dir is set
	uid, gid int
	dir      bool
	data     []byte
}

// tree is the content of one layer, keyed by absolute path.
type tree map[string]entry

// addDir adds a directory and any missing parents (root-owned, 0755).
func (t tree) addDir(p string, mode int64, uid, gid int) {
	p = cleanAbs(p)
	if p == "/" {
		return
	}
	t.addDir(path.Dir(p), 0o755, 0, 0)
	if _, ok := t[p]; !ok || mode != 0o755 || uid != 0 {
		t[p] = entry{mode: mode, uid: uid, gid: gid, dir: true}
	}
}

// addFile adds a root-owned file and its parent directories.
func (t tree) addFile(p string, mode int64, data []byte) {
	p = cleanAbs(p)
	t.addDir(path.Dir(p), 0o755, 0, 0)
	t[p] = entry{mode: mode, data: data}
}

// copyFrom copies a file or, like COPY, the contents of a directory from the host into dest.
// A file copied to a dest ending in "/" keeps its name.
func (t tree) copyFrom(src, dest string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		if strings.HasSuffix(dest, "/") {
			dest += filepath.Base(src)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		t.addFile(dest, int64(info.Mode().Perm()), data)
		return nil
	}
	t.addDir(dest, 0o755, 0, 0)
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dest, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			t.addDir(target, int64(info.Mode().Perm()), 0, 0)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			t.addFile(target, int64(info.Mode().Perm()), data)
		default:
			return fmt.Errorf("%s: only regular files and directories can be copied", p)
		}
		return nil
	})
}

// layer returns the tree as an uncompressed-then-gzipped image layer, entries in path order.
func (t tree) layer() (v1.Layer, error) {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := t[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// cleanAbs returns p as a clean absolute path.
func cleanAbs(p string) string {
	return path.Clean("/" + p)
}
