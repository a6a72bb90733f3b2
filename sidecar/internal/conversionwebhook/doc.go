// Package conversionwebhook serves a CRD's conversion webhook (apiextensions.k8s.io/v1
// ConversionReview) for the kinds whose chart has a conversions.yaml (internal/conversion),
// from the sidecar process of every replica: the API server calls it for each read and
// write of a CR in a version other than the stored one, and a replica that does not answer
// fails the tenant's request, so serving is not leader-elected.
//
// Handler converts the objects of a review. The API server fails a whole list when the
// conversion of one object fails, so a conversion never calls the API server, and an object
// the handler cannot read (a kind it does not serve, a malformed object) is passed through
// with only its apiVersion changed. The review fails only where passing an object through
// would lose a tenant's values: a version the kind's conversions.yaml does not list, or
// values the conversion would have to keep in an annotation that cannot hold them
// (conversion.MaxAnnotationBytes).
//
// Server serves Handler over TLS, on every replica, from a directory holding tls.crt and
// tls.key, reloaded when they change: the Secret that Rotate's rotator keeps
// (cert-controller's, which also injects its CA into each served CRD's
// spec.conversion.webhook.clientConfig.caBundle) mounted into the pod, or the files of a
// cert-manager Certificate, whose CA cert-manager's cainjector injects.
package conversionwebhook
