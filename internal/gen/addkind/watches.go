package addkind

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// watchEntry is the watches.yaml entry of a new kind; overrides are its overrideValues, if
// any (a safe default, see findSafeDefault).
type watchEntry struct {
	group, version, kind, chart string
	overrides                   map[string]string
}

// appendWatch returns the text of watches.yaml with e appended as the last entry, indented
// like the others; the rest of the file, comments included, is kept byte for byte. The
// result is checked to parse as the same entries followed by e.
func appendWatch(data []byte, e watchEntry) ([]byte, error) {
	before, err := watchfile.Parse(data)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode || seq.Style&yaml.FlowStyle != 0 || len(seq.Content) == 0 {
		return nil, errors.New("watches.yaml is not a block list of entries: add the entry by hand")
	}
	// The first key of an entry sits two columns after its dash.
	dash := strings.Repeat(" ", seq.Content[0].Column-3)
	text := string(data)
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	text += fmt.Sprintf("%s- group: %s\n%s  version: %s\n%s  kind: %s\n%s  chart: %s\n",
		dash, e.group, dash, e.version, dash, e.kind, dash, e.chart)
	if len(e.overrides) > 0 {
		text += dash + "  overrideValues:\n"
		for _, k := range slices.Sorted(maps.Keys(e.overrides)) {
			text += fmt.Sprintf("%s    %s: %q\n", dash, k, e.overrides[k])
		}
	}

	after, err := watchfile.Parse([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("watches.yaml with the new entry: %w", err)
	}
	want := append(entries(before), e)
	if !reflect.DeepEqual(entries(after), want) {
		return nil, fmt.Errorf("watches.yaml with the new entry reads as %v, want %v: add the entry by hand", entries(after), want)
	}
	return []byte(text), nil
}

func entries(ws []watchfile.Watch) []watchEntry {
	out := make([]watchEntry, 0, len(ws))
	for _, w := range ws {
		out = append(out, watchEntry{w.Group, w.Version, w.Kind, w.Chart, w.OverrideValues})
	}
	return out
}
