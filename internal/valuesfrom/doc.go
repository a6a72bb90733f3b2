// Package valuesfrom reads the values a custom resource takes from Secrets and ConfigMaps of
// its own namespace, spec.valuesFrom, as Flux's HelmRelease defines it, and merges them with
// the resource's own values.
//
// It is written for a shared operator whose tenants edit custom resources but must not read
// what their namespace holds beyond that:
//   - a reference has no namespace: a source is always in the resource's namespace;
//   - a Secret is read only if it carries ReadableLabel "true", which only someone who may
//     update the Secret can set: a user who may only edit custom resources cannot send a
//     Secret of their namespace into a rendered object;
//   - what is read is bounded (MaxRefs references, MaxBytes of keys in all), and a Secret's
//     data is read only once its metadata says it may be;
//   - errors name the source and the reason, never its content, and Redactor takes the
//     Secrets' strings out of any message that might quote them (Helm's render errors do).
package valuesfrom
