package crdgen

import apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// Where the API server calls the operator's conversion webhook, as config/default names
// things once kustomize has applied its namespace and namePrefix (warpdrive-operator-): the
// CRDs are applied as generated, and the conversion webhook's Service must have these names.
const (
	WebhookServiceName      = "warpdrive-operator-webhook-service"
	WebhookServiceNamespace = "warpdrive-operator-system"
	WebhookPath             = "/convert"
	WebhookPort             = 443
)

// webhookConversion is the conversion of a kind whose versions differ: the API server sends
// the operator's webhook ConversionReviews of v1, the only version it implements. The CA
// bundle is not generated: whoever rotates the webhook's certificate sets it.
func webhookConversion() *apiextv1.CustomResourceConversion {
	return &apiextv1.CustomResourceConversion{
		Strategy: apiextv1.WebhookConverter,
		Webhook: &apiextv1.WebhookConversion{
			ClientConfig: &apiextv1.WebhookClientConfig{
				Service: &apiextv1.ServiceReference{
					Name:      WebhookServiceName,
					Namespace: WebhookServiceNamespace,
					Path:      ptr(WebhookPath),
					Port:      ptr(int32(WebhookPort)),
				},
			},
			ConversionReviewVersions: []string{"v1"},
		},
	}
}
