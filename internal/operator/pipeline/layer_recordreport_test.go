package pipeline

import (
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// Records of another key are the release's own history after a lost key: the condition asks
// for the key back, never to delete them; a stranger's records are to delete.
func TestRefusalConditionAdvice(t *testing.T) {
	msg := func(refused map[string]error) string { return refusalCondition(refused)["message"].(string) }
	if m := msg(map[string]error{"sh.helm.release.v1.x.v1": releasesign.ErrUnsigned}); !strings.Contains(m, "delete the refused Secrets") {
		t.Errorf("a planted record: %s", m)
	}
	m := msg(map[string]error{"sh.helm.release.v1.x.v1": &releasesign.UnknownKeyError{ID: "0123456789ab"},
		"sh.helm.release.v1.x.v2": releasesign.ErrUnsigned})
	if !strings.Contains(m, "do not delete records signed by another key") || !strings.Contains(m, "restore the signing key") {
		t.Errorf("records of a lost key: %s", m)
	}
}
