package operator

import (
	"unicode/utf8"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
)

// maxEventMessage bounds an Event's message: an error may quote a value of any size.
const maxEventMessage = 1024

// maxConditionMessage bounds the message of each condition, as Kubernetes bounds those of
// metav1.Condition. Helm's errors quote the values they refuse: a spec with a 1 MiB label
// value failed with a 1 MiB message, the status patch was then too large to store, and the
// CR showed no status at all.
const maxConditionMessage = 32768

// truncate cuts s to about n bytes by removing its middle: an error quoting a huge value
// keeps its start (what failed) and its end (why), and no character is cut in two.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n/2, len(s)-n/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + " … " + s[tail:]
}

// isDryRun applies the upgrade options to a blank upgrade to see whether they ask for a dry run.
func isDryRun(opts []helmclient.UpgradeOption) bool {
	u := &action.Upgrade{}
	for _, o := range opts {
		if err := o(u); err != nil {
			return false
		}
	}
	return u.DryRun
}

// releaseKey names a release across namespaces, as the release guard's locks and the
// pending repair's operations key it.
func releaseKey(namespace, name string) string { return namespace + "/" + name }
