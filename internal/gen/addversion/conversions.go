package addversion

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// conversionsHeader starts a conversions.yaml that make add-version creates.
const conversionsHeader = `# The API versions of this chart's kind, oldest first, and where each step moves the values
# of spec (internal/conversion). make add-version appends a step: review its moves and drops.
`

// proposal is a step as make add-version proposes it: Infer's moves, and the fields it could
// not place as drops, each with Infer's reason. A drop keeps the value lossless (it travels
// in an annotation) until a person says where it went.
type proposal struct {
	from, to string
	moves    []conversion.Move
	drops    []drop
}

type drop struct{ pointer, reason string }

// propose is the step from one version's spec schema to the next's.
func propose(from, to string, oldSchema, newSchema map[string]any) proposal {
	p := proposal{from: from, to: to}
	moves, review := conversion.Infer(oldSchema, newSchema)
	p.moves = moves
	for _, r := range review {
		// Infer starts each line with the pointer of the field, then " (its type): why".
		ptr, _, ok := strings.Cut(r, " (")
		if ok && strings.HasPrefix(ptr, "/") {
			p.drops = append(p.drops, drop{ptr, r})
		}
	}
	return p
}

// text is the step as conversions.yaml writes it, the reasons of its drops as comments.
// commentDrops writes the drops as comments only, for a step conversion.Parse refuses
// with them.
func (p proposal) text(commentDrops bool) string {
	var b strings.Builder
	if len(p.moves) == 0 && len(p.drops) == 0 {
		fmt.Fprintf(&b, "\n# make add-version %s: nothing moves, %s has the schema of %s.\n", p.to, p.to, p.from)
	} else {
		fmt.Fprintf(&b, "\n# make add-version %s: review the moves; a drop whose value lives on in %s under\n", p.to, p.to)
		b.WriteString("# another name or place is a move.\n")
	}
	fmt.Fprintf(&b, "- from: %s\n  to: %s\n", p.from, p.to)
	if len(p.moves) > 0 {
		b.WriteString("  moves:\n")
		for _, m := range p.moves {
			fmt.Fprintf(&b, "  - {from: %s, to: %s}\n", yamlPointer(m.From), yamlPointer(m.To))
		}
	}
	if len(p.drops) > 0 {
		if commentDrops {
			b.WriteString("  # These fields are gone, and would be pruned: place each as a move or a drop.\n")
			b.WriteString("  # drops:\n")
		} else {
			b.WriteString("  drops:\n")
		}
		for _, d := range p.drops {
			fmt.Fprintf(&b, "  # %s\n", d.reason)
			if commentDrops {
				b.WriteString("  # ")
			} else {
				b.WriteString("  ")
			}
			fmt.Fprintf(&b, "- %s\n", yamlPointer(d.pointer))
		}
	}
	return b.String()
}

// plainPointer is a pointer YAML reads as the same string unquoted, in a flow mapping too.
var plainPointer = regexp.MustCompile(`^/[A-Za-z0-9_.~/-]*$`)

func yamlPointer(p string) string {
	if plainPointer.MatchString(p) {
		return p
	}
	return strconv.Quote(p)
}

// appendStep returns the content of conversions.yaml (existing, or nil when the chart has
// none) with the step p appended, checked by conversion.Parse, and the chain it makes.
// The text of existing is kept byte for byte: people write comments in it.
func appendStep(existing []byte, p proposal) ([]byte, *conversion.Chain, error) {
	text := string(existing)
	if text == "" {
		text = conversionsHeader
	} else if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	out := text + p.text(false)
	chain, err := conversion.Parse([]byte(out))
	if err != nil && len(p.drops) > 0 {
		// Drops that overlap a move or each other: a person places them.
		out = text + p.text(true)
		chain, err = conversion.Parse([]byte(out))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s with the step from %s to %s: %w", conversion.FileName, p.from, p.to, err)
	}
	return []byte(out), chain, nil
}
