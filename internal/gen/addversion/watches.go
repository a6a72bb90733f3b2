package addversion

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// setWatchVersion returns the text of watches.yaml with the version of kind's entry set to
// version. Only that value changes, so that the file's comments and layout stay; the result
// is checked to parse as the same entries but for that version.
func setWatchVersion(data []byte, kind, version string) ([]byte, error) {
	before, err := watchfile.Parse(data)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, errors.New("watches.yaml is not a list of entries")
	}
	var value *yaml.Node
	for _, entry := range doc.Content[0].Content {
		var k, v *yaml.Node
		for i := 0; i+1 < len(entry.Content); i += 2 {
			switch strings.ToLower(entry.Content[i].Value) { // the helm-operator matches keys so
			case "kind":
				k = entry.Content[i+1]
			case "version":
				v = entry.Content[i+1]
			}
		}
		if k != nil && k.Value == kind {
			value = v
		}
	}
	if value == nil || value.Style != 0 || value.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("watches.yaml: the version of %s is not a plain value on a line: set it to %s by hand", kind, version)
	}
	lines := strings.SplitAfter(string(data), "\n")
	line := lines[value.Line-1]
	col := value.Column - 1
	if col+len(value.Value) > len(line) || line[col:col+len(value.Value)] != value.Value {
		return nil, fmt.Errorf("watches.yaml: the version of %s is not where it parses: set it to %s by hand", kind, version)
	}
	lines[value.Line-1] = line[:col] + version + line[col+len(value.Value):]
	out := []byte(strings.Join(lines, ""))

	after, err := watchfile.Parse(out)
	if err != nil {
		return nil, fmt.Errorf("watches.yaml with %s at %s: %w", kind, version, err)
	}
	for i := range before {
		if before[i].Kind == kind {
			before[i].Version = version
		}
	}
	if !reflect.DeepEqual(before, after) {
		return nil, fmt.Errorf("watches.yaml with %s at %s does not read as the same entries: set it by hand", kind, version)
	}
	return out, nil
}
