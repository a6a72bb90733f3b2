package valuesfrom

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Redacted replaces a Secret's string in a message.
const Redacted = "[redacted]"

// minSecretLength is the shortest string redacted: shorter ones ("true", "80") are in every
// message, and redacting them would only garble it.
const minSecretLength = 4

// Redactor takes the strings read from Secrets out of messages: Helm's render errors quote
// values ("error calling fail: ..."), the API server's quote fields of the objects it
// refuses, and base64 is how a rendered Secret holds them. The zero value redacts nothing.
type Redactor struct {
	secrets []string // longest first, so that a string inside another is not redacted first
}

// addText adds a key's text, whole and line by line.
func (r *Redactor) addText(text []byte) {
	s := strings.TrimSpace(string(text))
	r.add(s)
	for _, line := range strings.Split(s, "\n") {
		r.add(strings.TrimSpace(line))
	}
}

// addValues adds every scalar of vals, as text.
func (r *Redactor) addValues(vals any) {
	switch v := vals.(type) {
	case map[string]any:
		for _, e := range v {
			r.addValues(e)
		}
	case []any:
		for _, e := range v {
			r.addValues(e)
		}
	case string:
		r.add(v)
	case nil, bool:
	default:
		r.add(fmt.Sprint(v))
	}
}

func (r *Redactor) add(s string) {
	if len(s) < minSecretLength {
		return
	}
	r.secrets = append(r.secrets, s, base64.StdEncoding.EncodeToString([]byte(s)))
}

// done sorts r's strings once they are all added.
func (r *Redactor) done() {
	sort.Slice(r.secrets, func(i, j int) bool {
		if a, b := r.secrets[i], r.secrets[j]; len(a) != len(b) {
			return len(a) > len(b)
		}
		return r.secrets[i] < r.secrets[j]
	})
	r.secrets = slices.Compact(r.secrets) // duplicates are next to each other
}

// Empty reports whether r redacts nothing.
func (r Redactor) Empty() bool { return len(r.secrets) == 0 }

// Redact returns msg with every string of r replaced by Redacted.
func (r Redactor) Redact(msg string) string {
	for _, s := range r.secrets {
		msg = strings.ReplaceAll(msg, s, Redacted)
	}
	return msg
}

// Error is err with its message redacted; nil stays nil, and an error that quotes nothing
// of r is returned as it is, so that errors.Is and errors.As still see through it.
func (r Redactor) Error(err error) error {
	if err == nil || r.Empty() {
		return err
	}
	msg := err.Error()
	if red := r.Redact(msg); red != msg {
		return redactedError{msg: red, err: err}
	}
	return err
}

// redactedError keeps the error it redacts for errors.Is (driver.ErrReleaseNotFound and the
// like), but never prints it.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
