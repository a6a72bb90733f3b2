package kindgen

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Marker is one permission a +kubebuilder:rbac marker in the operator's code asks for: a verb
// on a resource of an API group, and the directory (relative to the scanned root) of the file
// that has it. The generator adds the markers' verbs on the custom resources to the manager
// role's rules on them, so that code which needs more than the helm-operator does (as
// sidecar/internal/poolstatus reads a pool's status) says so next to the code.
type Marker struct {
	Group, Resource, Verb string
	Dir                   string
}

var markerRE = regexp.MustCompile(`//\s*\+kubebuilder:rbac:(\S+)`)

// ReadMarkers returns the +kubebuilder:rbac markers of the non-test Go files under each of
// dirs (relative to root; a missing directory has none), sorted.
func ReadMarkers(root string, dirs []string) ([]Marker, error) {
	seen := map[Marker]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			for _, m := range markerRE.FindAllStringSubmatch(string(data), -1) {
				for _, p := range parseMarker(m[1]) {
					p.Dir = filepath.ToSlash(rel)
					seen[p] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]Marker, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return strings.Join([]string{a.Group, a.Resource, a.Verb, a.Dir}, "\x00") <
			strings.Join([]string{b.Group, b.Resource, b.Verb, b.Dir}, "\x00")
	})
	return out, nil
}

// parseMarker expands "groups=g,resources=r1;r2,verbs=v1;v2" into its permissions.
func parseMarker(s string) []Marker {
	fields := map[string][]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = strings.Split(strings.Trim(v, `"`), ";")
	}
	var out []Marker
	for _, g := range fields["groups"] {
		for _, r := range fields["resources"] {
			for _, v := range fields["verbs"] {
				out = append(out, Marker{Group: strings.Trim(g, `"`), Resource: r, Verb: v})
			}
		}
	}
	return out
}
