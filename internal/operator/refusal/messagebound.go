package refusal

import "unicode/utf8"

// MaxEventMessage bounds an Event's message: an error may quote a value of any size.
const MaxEventMessage = 1024

// MaxConditionMessage bounds the message of each condition, as Kubernetes bounds those of
// metav1.Condition. Helm's errors quote the values they refuse: a spec with a 1 MiB label
// value failed with a 1 MiB message, the status patch was then too large to store, and the
// CR showed no status at all.
const MaxConditionMessage = 32768

// Truncate cuts s to about n bytes by removing its middle: an error quoting a huge value
// keeps its start (what failed) and its end (why), and no character is cut in two.
func Truncate(s string, n int) string {
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
