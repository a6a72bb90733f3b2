package addkind

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"
)

// chartFile is a file of a chart: its slash-separated path in the chart and its bytes as
// they are in the source (subcharts vendored as .tgz stay archives).
type chartFile struct {
	Name string
	Data []byte
	Mode fs.FileMode
}

// readChartFiles returns the files of the chart at src, a directory or a packaged chart
// (.tgz), as Helm's loader reads them: in a directory, what the chart's .helmignore excludes
// is left out, and so are the dot-files of templates/.
func readChartFiles(src string) ([]chartFile, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		buffered, err := loader.LoadArchiveFiles(f)
		if err != nil {
			return nil, fmt.Errorf("%s is neither a chart directory nor a packaged chart: %w", src, err)
		}
		files := make([]chartFile, 0, len(buffered))
		for _, b := range buffered {
			files = append(files, chartFile{Name: b.Name, Data: b.Data, Mode: 0o644})
		}
		return files, nil
	}
	return readChartDir(src)
}

func readChartDir(dir string) ([]chartFile, error) {
	rules := ignore.Empty()
	if _, err := os.Stat(filepath.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.ParseFile(filepath.Join(dir, ignore.HelmIgnore)); err != nil {
			return nil, err
		}
	}
	rules.AddDefaults()
	var files []chartFile
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		if fi.Mode()&os.ModeSymlink != 0 {
			// Helm's loader follows links; a linked file is copied as a file.
			if fi, err = os.Stat(path); err != nil {
				return err
			}
			if fi.IsDir() {
				return fmt.Errorf("%s is a link to a directory: package the chart (helm package) and add the .tgz", path)
			}
		}
		if fi.IsDir() {
			if rules.Ignore(name, fi) {
				return filepath.SkipDir
			}
			return nil
		}
		if rules.Ignore(name, fi) {
			return nil
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, chartFile{Name: name, Data: data, Mode: fi.Mode().Perm() | 0o600})
		return nil
	})
	return files, err
}

// loadChartFiles loads a chart from its files, as Helm does.
func loadChartFiles(files []chartFile) (*chart.Chart, error) {
	buffered := make([]*loader.BufferedFile, 0, len(files))
	for _, f := range files {
		// The loader drops a UTF-8 byte order mark from what it reads; the copy keeps it.
		buffered = append(buffered, &loader.BufferedFile{Name: f.Name, Data: bytes.Clone(f.Data)})
	}
	return loader.LoadFiles(buffered)
}

// writeChartFiles writes files under dir, which must not exist yet.
func writeChartFiles(dir string, files []chartFile) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("chart file %q lies outside the chart", f.Name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.Data, f.Mode); err != nil {
			return err
		}
	}
	return nil
}

// missingDependencies lists the dependencies that c and its subcharts declare in Chart.yaml
// but do not vendor under charts/, as "chart → dependency" paths: each would need a download
// (helm dependency build), which the operator never does.
func missingDependencies(c *chart.Chart) []string {
	var missing []string
	var walk func(c *chart.Chart, path string)
	walk = func(c *chart.Chart, path string) {
		vendored := map[string]*chart.Chart{}
		for _, d := range c.Dependencies() {
			vendored[d.Name()] = d
		}
		for _, dep := range c.Metadata.Dependencies {
			if _, ok := vendored[dep.Name]; !ok {
				where := dep.Repository
				if where == "" {
					where = "no repository"
				}
				missing = append(missing, fmt.Sprintf("%s → %s %s (%s)", path, dep.Name, dep.Version, where))
			}
		}
		for _, d := range c.Dependencies() {
			walk(d, path+" → "+d.Name())
		}
	}
	walk(c, c.Name())
	sort.Strings(missing)
	return missing
}
