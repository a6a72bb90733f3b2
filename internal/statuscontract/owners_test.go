package statuscontract

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// No two writers own the same status field or condition type, and each field manager names
// one writer: otherwise one's apply would take the other's field away.
func TestStatusOwnersDoNotOverlap(t *testing.T) {
	fields, conds, managers := map[string]string{}, map[string]string{}, map[string]bool{}
	for _, o := range StatusOwners {
		name := o.Process + "/" + o.FieldManager
		if o.FieldManager != "" {
			if managers[o.FieldManager] {
				t.Errorf("field manager %s names two owners", o.FieldManager)
			}
			managers[o.FieldManager] = true
		}
		if o.Process != ProcessManager && o.Process != ProcessSidecar {
			t.Errorf("%s: process %q", name, o.Process)
		}
		for _, f := range o.Fields {
			if prev, ok := fields[f]; ok {
				t.Errorf("status.%s is owned by %s and %s", f, prev, name)
			}
			fields[f] = name
		}
		for _, c := range o.Conditions {
			if prev, ok := conds[c]; ok {
				t.Errorf("condition %s is owned by %s and %s", c, prev, name)
			}
			conds[c] = name
		}
	}
	for _, m := range []string{HelmFieldManager, ManagerFieldManager, SidecarFieldManager} {
		if !managers[m] {
			t.Errorf("field manager %s owns nothing", m)
		}
	}
}

// The manager decides exactly the conditions ManagerStatus declares.
func TestDecideWritesTheManagersConditions(t *testing.T) {
	d := Decide(State{Generation: 1})
	// ChartRollout is the rollout controller's word, which the readiness controller writes
	// beside Decide's (internal/operator/rollout_controller.go).
	got := []string{d.Ready.Type, d.Reconciling.Type, d.Stalled.Type, ChartRollout}
	if strings.Join(got, ",") != strings.Join(ManagerStatus.Conditions, ",") {
		t.Errorf("Decide writes %v, ManagerStatus declares %v", got, ManagerStatus.Conditions)
	}
}

// The helm-operator's status update keeps every condition but the others'.
func TestConditionsOwnedByOthers(t *testing.T) {
	got := ConditionsOwnedByOthers(HelmFieldManager)
	var names []string
	for c := range got {
		names = append(names, c)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "ChartRollout,Ready,Reconciling,RolledOut,Stalled" {
		t.Errorf("conditions of others than the helm-operator: %v", names)
	}
}

// docs/status.md's table "Fields and their writers" lists exactly the declared fields and
// conditions, each with the process of its declared owner; its table of field managers
// names each field manager with its process.
func TestStatusOwnersMatchTheDocs(t *testing.T) {
	data, err := os.ReadFile("../../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	rows := tableRows(t, doc, "| field | writer | meaning |")
	ticked := regexp.MustCompile("`([^`]+)`")
	documented := map[string]string{} // "field x" or "condition x" -> process
	for _, row := range rows {
		what, writer := row[0], strings.Fields(row[1])[0]
		kind := "field"
		if strings.HasPrefix(what, "condition") {
			kind = "condition"
		}
		for _, m := range ticked.FindAllStringSubmatch(what, -1) {
			documented[kind+" "+strings.TrimPrefix(m[1], "status.")] = writer
		}
	}
	declared := map[string]string{}
	for _, o := range StatusOwners {
		for _, f := range o.Fields {
			declared["field "+f] = o.Process
		}
		for _, c := range o.Conditions {
			declared["condition "+c] = o.Process
		}
	}
	for k, p := range declared {
		if documented[k] != p {
			t.Errorf("%s: declared written by the %s, docs/status.md says %q", k, p, documented[k])
		}
	}
	for k := range documented {
		if _, ok := declared[k]; !ok {
			t.Errorf("docs/status.md lists %s, which no StatusOwner declares", k)
		}
	}

	managers := map[string]string{}
	for _, row := range tableRows(t, doc, "| field manager | process | owns |") {
		managers[strings.Trim(row[0], "`")] = strings.TrimSuffix(strings.Fields(row[1])[0], ":")
	}
	for _, o := range StatusOwners {
		if o.FieldManager != "" && managers[o.FieldManager] != o.Process {
			t.Errorf("field manager %s: declared in the %s, docs/status.md says %q", o.FieldManager, o.Process, managers[o.FieldManager])
		}
	}
	if len(managers) != 3 {
		t.Errorf("docs/status.md names %d field managers, want 3: %v", len(managers), managers)
	}
}

// tableRows returns the cells of the rows of the Markdown table under header.
func tableRows(t *testing.T, doc, header string) [][]string {
	t.Helper()
	i := strings.Index(doc, header)
	if i < 0 {
		t.Fatalf("docs/status.md has no table %q", header)
	}
	lines := strings.Split(doc[i:], "\n")[2:] // past the header and the |---| line
	var out [][]string
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		out = append(out, cells)
	}
	if len(out) == 0 {
		t.Fatalf("docs/status.md: table %q is empty", header)
	}
	return out
}
