package addkind

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart"
	sigsyaml "sigs.k8s.io/yaml"
)

// annotation is a Chart.yaml annotation add-kind sets.
type annotation struct{ key, value string }

// setAnnotations returns the text of a Chart.yaml with the annotations set, and what it
// changed ("key: old → new"; "key: value" for a new one). The rest of the file is kept byte for
// byte, comments included: an existing annotation's line is rewritten in place, new ones go
// after the last line of the annotations block, which is added at the end of the file if the
// chart has none. The result is checked to hold the same metadata but for these annotations.
func setAnnotations(data []byte, want []annotation) ([]byte, []string, error) {
	text := string(data)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, nil, fmt.Errorf("parsing Chart.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, errors.New("the chart's Chart.yaml is not a YAML mapping")
	}
	root := doc.Content[0]
	lines := strings.SplitAfter(text, "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline

	var key, value *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "annotations" {
			key, value = root.Content[i], root.Content[i+1]
		}
	}
	var changes []string
	var added []string // new entries, without their indentation
	switch {
	case key == nil:
		lines = append(lines, "annotations:\n")
		key = &yaml.Node{Line: len(lines), Column: 1}
		value = &yaml.Node{Kind: yaml.MappingNode}
	case value.Kind == yaml.ScalarNode && value.Tag == "!!null",
		value.Kind == yaml.MappingNode && len(value.Content) == 0 && value.Line == key.Line:
		// "annotations:" alone, "annotations: ~" or "annotations: {}": a block from now on.
		line := lines[key.Line-1]
		lines[key.Line-1] = line[:key.Column-1] + "annotations:" + lineComment(key, value) + "\n"
		value = &yaml.Node{Kind: yaml.MappingNode}
	case value.Kind != yaml.MappingNode || value.Style&yaml.FlowStyle != 0:
		return nil, nil, errors.New("the annotations of Chart.yaml are not a block mapping: write it as one (key: value lines) and run add-kind again")
	}

	for _, a := range want {
		formatted, err := formatScalar(a.value)
		if err != nil {
			return nil, nil, err
		}
		var old *yaml.Node
		for i := 0; i+1 < len(value.Content); i += 2 {
			if value.Content[i].Value == a.key {
				old = value.Content[i+1]
			}
		}
		switch {
		case old == nil:
			added = append(added, a.key+": "+formatted+"\n")
			changes = append(changes, fmt.Sprintf("%s: %s", a.key, a.value))
		case old.Value == a.value:
		case old.Kind != yaml.ScalarNode || old.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
			return nil, nil, fmt.Errorf("annotation %s of Chart.yaml spans several lines: set it to %q by hand", a.key, a.value)
		default:
			line := lines[old.Line-1]
			lines[old.Line-1] = line[:old.Column-1] + formatted + lineComment(old) + "\n"
			changes = append(changes, fmt.Sprintf("%s: %s → %s", a.key, old.Value, a.value))
		}
	}

	if len(added) > 0 {
		indent := "  "
		if len(value.Content) > 0 {
			indent = strings.Repeat(" ", value.Content[0].Column-1)
		}
		end := blockEnd(lines, key)
		var block []string
		for _, a := range added {
			block = append(block, indent+a)
		}
		lines = append(lines[:end:end], append(block, lines[end:]...)...)
	}
	out := []byte(strings.Join(lines, ""))
	if err := checkOnlyAnnotationsChanged(data, out, want); err != nil {
		return nil, nil, fmt.Errorf("editing Chart.yaml: %w", err)
	}
	return out, changes, nil
}

// blockEnd is the index of the line after the block of key: the lines after key's own that
// are blank or indented deeper than key, up to the last of those that is not blank.
func blockEnd(lines []string, key *yaml.Node) int {
	end := key.Line // the index after key's line
	for i := key.Line; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " \t")
		if strings.TrimSpace(trimmed) == "" {
			continue
		}
		if len(lines[i])-len(trimmed) <= key.Column-1 {
			break
		}
		end = i + 1
	}
	return end
}

// lineComment is the comment at the end of the line of the last node given, " # ..." or "".
func lineComment(nodes ...*yaml.Node) string {
	for i := len(nodes) - 1; i >= 0; i-- {
		if c := nodes[i].LineComment; c != "" {
			return " " + c
		}
	}
	return ""
}

// formatScalar writes s as a one-line YAML string, quoted only if it must be.
func formatScalar(s string) (string, error) {
	out, err := yaml.Marshal(s)
	if err != nil {
		return "", err
	}
	formatted := strings.TrimSuffix(string(out), "\n")
	if strings.Contains(formatted, "\n") {
		return "", fmt.Errorf("annotation value %q does not fit on a line", s)
	}
	return formatted, nil
}

// checkOnlyAnnotationsChanged verifies that after holds the metadata of before with the
// annotations want set, and nothing else changed.
func checkOnlyAnnotationsChanged(before, after []byte, want []annotation) error {
	var b, a chart.Metadata
	if err := sigsyaml.Unmarshal(before, &b); err != nil {
		return err
	}
	if err := sigsyaml.Unmarshal(after, &a); err != nil {
		return err
	}
	wantAnnotations := maps.Clone(b.Annotations)
	if wantAnnotations == nil {
		wantAnnotations = map[string]string{}
	}
	for _, w := range want {
		wantAnnotations[w.key] = w.value
	}
	if !maps.Equal(a.Annotations, wantAnnotations) {
		return fmt.Errorf("annotations %v, want %v", a.Annotations, wantAnnotations)
	}
	a.Annotations, b.Annotations = nil, nil
	if !reflect.DeepEqual(a, b) {
		return errors.New("fields other than the annotations changed")
	}
	return nil
}
