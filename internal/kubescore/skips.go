package kubescore

import "slices"

// Skip is a kube-score check that is not applied, and why.
type Skip struct {
	// Check is kube-score's ID of the check (kube-score list).
	Check string
	// Targets are where it is skipped: ConfigDefault, Charts; none, everywhere.
	Targets []string
	// Why it is skipped.
	Why string
}

// Targets of a skip.
const (
	// ConfigDefault is what make deploy applies: kustomize build config/default.
	ConfigDefault = "config/default"
	// Charts are the charts of the watched kinds, rendered from a CR: the five of
	// helm-charts/ and any chart make add-kind adds.
	Charts = "charts"
)

// Skips are every check the lint gate and make add-kind's report leave aside: this is the one
// place one is named and justified. kube-score's optional checks are not run either.
var Skips = []Skip{
	{
		Check: "container-image-pull-policy",
		Why: "it wants imagePullPolicy Always, to re-check imagePullSecrets at each pod start. Every image here has a " +
			"pinned tag and is public; Always would make each pod start depend on the registry, and the operator's " +
			"image on the local cluster's real node is only in the node's containerd (make image-load), where " +
			"Always cannot pull it. The default, IfNotPresent for a tagged image, is what these pods need.",
	},
	{
		Check:   "container-image-tag",
		Targets: []string{ConfigDefault},
		Why: "config/default carries kustomize's placeholder image warpdrive-operator:latest, which make deploy " +
			"and make bundle replace with IMG (kustomize edit set image) before anything is applied. The charts " +
			"are checked: their images have pinned tags.",
	},
	{
		Check:   "pod-networkpolicy",
		Targets: []string{Charts},
		Why: "which clients may reach a tenant's workload is the tenant's and the platform's to say (a namespace's " +
			"default-deny policy, its allowed sources), and a chart cannot know them: a policy it shipped would have " +
			"to admit every source on the served port to keep the samples' clients working, which passes the check " +
			"and restricts nothing. And every kind a chart renders is a right the manager's ClusterRole must hold " +
			"in every namespace (make manifests grants it): NetworkPolicies in tenants' namespaces are not " +
			"granted for that. config/default is checked: the operator's own pod has its NetworkPolicy.",
	},
}

// SkipsFor returns the skips that apply to target: ConfigDefault, or a chart's name.
func SkipsFor(target string) []Skip {
	kind := Charts
	if target == ConfigDefault {
		kind = ConfigDefault
	}
	var out []Skip
	for _, s := range Skips {
		if len(s.Targets) == 0 || slices.Contains(s.Targets, kind) {
			out = append(out, s)
		}
	}
	return out
}
