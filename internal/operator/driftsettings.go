package operator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DriftMode is what the operator does when an object of a release differs from the release's
// manifest in a field the manifest sets (docs/drift.md).
type DriftMode string

const (
	// DriftRepair patches the field back to the manifest's value: the stock helm-operator's
	// behaviour, and the default.
	DriftRepair DriftMode = "repair"
	// DriftReport leaves the object as it is, and says so on the CR: a Warning Event
	// (DriftDetected) naming the objects and the paths that drifted, and the Drifted condition.
	DriftReport DriftMode = "report"
	// DriftOff neither watches the release's objects nor repairs them; an upgrade still applies
	// the chart.
	DriftOff DriftMode = "off"
)

// DriftIgnore is a field of the objects of one kind under which the operator neither repairs
// nor reports a change: a JSON pointer (RFC 6901), as Flux's helm-controller's drift
// detection takes them.
type DriftIgnore struct {
	Kind string // the objects' kind; "*" for every kind
	Path string // the JSON pointer, such as /spec/replicas
}

// tokens are the pointer's reference tokens, decoded (~1 is "/", ~0 is "~").
func (ig DriftIgnore) tokens() []string {
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	parts := strings.Split(strings.TrimPrefix(ig.Path, "/"), "/")
	for i, p := range parts {
		parts[i] = unescape.Replace(p)
	}
	return parts
}

// parseDriftIgnore reads one KIND:POINTER.
func parseDriftIgnore(s string) (DriftIgnore, error) {
	kind, path, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || kind == "" || !strings.HasPrefix(path, "/") || path == "/" {
		return DriftIgnore{}, fmt.Errorf("%q is not KIND:/json/pointer", s)
	}
	ig := DriftIgnore{Kind: kind, Path: path}
	// Helm finds each object of the manifest by these: without them nothing can be repaired.
	switch tok := ig.tokens(); {
	case len(tok) == 1 && (tok[0] == "apiVersion" || tok[0] == "kind" || tok[0] == "metadata"),
		len(tok) == 2 && tok[0] == "metadata" && (tok[1] == "name" || tok[1] == "namespace"):
		return DriftIgnore{}, fmt.Errorf("%s names the object itself and cannot be ignored", path)
	}
	return ig, nil
}

// DriftSetting is what one kind does about drift.
type DriftSetting struct {
	Mode   DriftMode
	Ignore []DriftIgnore
}

// String is the setting as ParseDriftSetting reads it.
func (s DriftSetting) String() string {
	if len(s.Ignore) == 0 {
		return string(s.Mode)
	}
	rules := make([]string, len(s.Ignore))
	for i, ig := range s.Ignore {
		rules[i] = ig.Kind + ":" + ig.Path
	}
	return string(s.Mode) + ";ignore=" + strings.Join(rules, ",")
}

// ParseDriftSetting reads MODE[;ignore=KIND:POINTER,...]: MODE is repair, report or off; each
// rule's KIND is an object kind (or * for every kind) and POINTER a JSON pointer, such as
// "repair;ignore=Deployment:/spec/replicas,ConfigMap:/data/tuning".
func ParseDriftSetting(s string) (DriftSetting, error) {
	mode, rest, _ := strings.Cut(strings.TrimSpace(s), ";")
	set := DriftSetting{Mode: DriftMode(strings.TrimSpace(mode))}
	switch set.Mode {
	case DriftRepair, DriftReport, DriftOff:
	default:
		return DriftSetting{}, fmt.Errorf("mode %q is not repair, report or off", mode)
	}
	for part := range strings.SplitSeq(rest, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		key, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		if key != "ignore" {
			return DriftSetting{}, fmt.Errorf("unknown setting %q (ignore)", key)
		}
		for rule := range strings.SplitSeq(val, ",") {
			ig, err := parseDriftIgnore(rule)
			if err != nil {
				return DriftSetting{}, err
			}
			set.Ignore = append(set.Ignore, ig)
		}
	}
	if set.Mode == DriftOff && len(set.Ignore) > 0 {
		return DriftSetting{}, errors.New("off ignores everything: no ignore rules with it")
	}
	return set, nil
}

// DriftSettings are the drift settings by CR kind, from the flag --drift=Kind=SETTING
// (repeated); a kind not named repairs, or has the setting of "*=SETTING". They live in a
// flag rather than in watches.yaml: the manager reads watches.yaml strictly (internal/watchfile),
// and the stock helm-operator, which reads the same file, knows no such key.
type DriftSettings map[string]DriftSetting

// For is kind's setting.
func (ds DriftSettings) For(kind string) DriftSetting {
	if s, ok := ds[kind]; ok {
		return s
	}
	if s, ok := ds["*"]; ok {
		return s
	}
	return DriftSetting{Mode: DriftRepair}
}

// String lists the settings, for the flag's help.
func (ds DriftSettings) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ds)) {
		parts = append(parts, k+"="+ds[k].String())
	}
	return strings.Join(parts, " ")
}

// Set reads one Kind=SETTING (flag.Value).
func (ds DriftSettings) Set(s string) error {
	kind, setting, ok := strings.Cut(s, "=")
	if !ok || kind == "" {
		return fmt.Errorf("%q is not Kind=SETTING", s)
	}
	set, err := ParseDriftSetting(setting)
	if err != nil {
		return fmt.Errorf("drift setting of %s: %w", kind, err)
	}
	ds[kind] = set
	return nil
}
