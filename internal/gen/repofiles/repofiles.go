// Package repofiles keeps what a generator writes into the repository undoable: the files of
// a few paths are read before it writes (Snapshot), put back as they were if it fails
// (Restore), and listed by what changed if it succeeds (Changed), for the user to review.
// make add-kind, make add-version and make remove-version use it.
package repofiles

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Snapshot reads the files under each of paths (files or directories) of root, by their
// slash-separated path relative to root. A path that does not exist holds no file.
func Snapshot(root string, paths []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			out[filepath.ToSlash(rel)] = data
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Restore puts back the files of before, a Snapshot of paths, and removes those created
// since under paths. It runs after a failure: its own errors are added to that one.
func Restore(root string, paths []string, before map[string][]byte) error {
	now, err := Snapshot(root, paths)
	if err != nil {
		return err
	}
	var errs []error
	for rel := range now {
		if _, ok := before[rel]; !ok {
			errs = append(errs, os.Remove(filepath.Join(root, filepath.FromSlash(rel))))
		}
	}
	for rel, data := range before {
		if old, ok := now[rel]; !ok || string(old) != string(data) {
			path := filepath.Join(root, filepath.FromSlash(rel))
			errs = append(errs, os.MkdirAll(filepath.Dir(path), 0o755), os.WriteFile(path, data, 0o644))
		}
	}
	return errors.Join(errs...)
}

// Changed lists the files new, changed or removed from before to after, sorted, each with
// what happened to it: "<path> (new)", "<path>", "<path> (removed)".
func Changed(before, after map[string][]byte) []string {
	var out []string
	for rel, data := range after {
		old, ok := before[rel]
		switch {
		case !ok:
			out = append(out, rel+" (new)")
		case string(old) != string(data):
			out = append(out, rel)
		}
	}
	for rel := range before {
		if _, ok := after[rel]; !ok {
			out = append(out, rel+" (removed)")
		}
	}
	slices.Sort(out)
	return out
}
