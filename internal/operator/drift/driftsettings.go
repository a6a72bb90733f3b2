package drift

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Mode is what the operator does when an object of a release differs from the release's
// manifest in a field the manifest sets (docs/drift.md).
type Mode string

const (
	// Repair patches the field back to the manifest's value: the stock helm-operator's
	// behaviour, and the default.
	Repair Mode = "repair"
	// Report leaves the object as it is, and says so on the CR: a Warning Event
	// (DriftDetected) naming the objects and the paths that drifted, and the Drifted condition.
	Report Mode = "report"
	// Off neither watches the release's objects nor repairs them; an upgrade still applies
	// the chart.
	Off Mode = "off"
)

// Ignore is a field of the objects of one kind under which the operator neither repairs
// nor reports a change: a JSON pointer (RFC 6901), as Flux's helm-controller's drift
// detection takes them.
type Ignore struct {
	Kind string // the objects' kind; "*" for every kind
	Path string // the JSON pointer, such as /spec/replicas
}

// tokens are the pointer's reference tokens, decoded (~1 is "/", ~0 is "~").
func (ig Ignore) tokens() []string {
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	parts := strings.Split(strings.TrimPrefix(ig.Path, "/"), "/")
	for i, p := range parts {
		parts[i] = unescape.Replace(p)
	}
	return parts
}

// parseIgnore reads one KIND:POINTER.
func parseIgnore(s string) (Ignore, error) {
	kind, path, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || kind == "" || !strings.HasPrefix(path, "/") || path == "/" {
		return Ignore{}, fmt.Errorf("%q is not KIND:/json/pointer", s)
	}
	ig := Ignore{Kind: kind, Path: path}
	// Helm finds each object of the manifest by these: without them nothing can be repaired.
	switch tok := ig.tokens(); {
	case len(tok) == 1 && (tok[0] == "apiVersion" || tok[0] == "kind" || tok[0] == "metadata"),
		len(tok) == 2 && tok[0] == "metadata" && (tok[1] == "name" || tok[1] == "namespace"):
		return Ignore{}, fmt.Errorf("%s names the object itself and cannot be ignored", path)
	}
	return ig, nil
}

// Setting is what one kind does about drift.
type Setting struct {
	Mode   Mode
	Ignore []Ignore
}

// String is the setting as ParseSetting reads it.
func (s Setting) String() string {
	if len(s.Ignore) == 0 {
		return string(s.Mode)
	}
	rules := make([]string, len(s.Ignore))
	for i, ig := range s.Ignore {
		rules[i] = ig.Kind + ":" + ig.Path
	}
	return string(s.Mode) + ";ignore=" + strings.Join(rules, ",")
}

// ParseSetting reads MODE[;ignore=KIND:POINTER,...]: MODE is repair, report or off; each
// rule's KIND is an object kind (or * for every kind) and POINTER a JSON pointer, such as
// "repair;ignore=Deployment:/spec/replicas,ConfigMap:/data/tuning".
func ParseSetting(s string) (Setting, error) {
	mode, rest, _ := strings.Cut(strings.TrimSpace(s), ";")
	set := Setting{Mode: Mode(strings.TrimSpace(mode))}
	switch set.Mode {
	case Repair, Report, Off:
	default:
		return Setting{}, fmt.Errorf("mode %q is not repair, report or off", mode)
	}
	for part := range strings.SplitSeq(rest, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		key, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		if key != "ignore" {
			return Setting{}, fmt.Errorf("unknown setting %q (ignore)", key)
		}
		for rule := range strings.SplitSeq(val, ",") {
			ig, err := parseIgnore(rule)
			if err != nil {
				return Setting{}, err
			}
			set.Ignore = append(set.Ignore, ig)
		}
	}
	if set.Mode == Off && len(set.Ignore) > 0 {
		return Setting{}, errors.New("off ignores everything: no ignore rules with it")
	}
	return set, nil
}

// Settings are the drift settings by CR kind, from the flag --drift=Kind=SETTING
// (repeated); a kind not named repairs, or has the setting of "*=SETTING". They live in a
// flag rather than in watches.yaml: the manager reads watches.yaml strictly (internal/watchfile),
// and the stock helm-operator, which reads the same file, knows no such key.
type Settings map[string]Setting

// For is kind's setting.
func (ds Settings) For(kind string) Setting {
	if s, ok := ds[kind]; ok {
		return s
	}
	if s, ok := ds["*"]; ok {
		return s
	}
	return Setting{Mode: Repair}
}

// String lists the settings, for the flag's help.
func (ds Settings) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ds)) {
		parts = append(parts, k+"="+ds[k].String())
	}
	return strings.Join(parts, " ")
}

// Set reads one Kind=SETTING (flag.Value).
func (ds Settings) Set(s string) error {
	kind, setting, ok := strings.Cut(s, "=")
	if !ok || kind == "" {
		return fmt.Errorf("%q is not Kind=SETTING", s)
	}
	set, err := ParseSetting(setting)
	if err != nil {
		return fmt.Errorf("drift setting of %s: %w", kind, err)
	}
	ds[kind] = set
	return nil
}
