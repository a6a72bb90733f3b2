package crdgen

import (
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// servedVersion is the CRD version gvk.Version of the kind whose spec schema is spec. The
// newest version is strict: a replicas path or a printer column the spec lacks is the
// chart's error. An older version's spec may lack them (a field renamed since), and then
// goes without the scale subresource or the column, rather than hold the chart back.
func servedVersion(gvk schema.GroupVersionKind, chartName string, spec *apiextv1.JSONSchemaProps, status apiextv1.JSONSchemaProps, info kindInfo, strict bool) (apiextv1.CustomResourceDefinitionVersion, error) {
	version := apiextv1.CustomResourceDefinitionVersion{
		Name:    gvk.Version,
		Served:  true,
		Storage: strict,
		Schema: &apiextv1.CustomResourceValidation{
			OpenAPIV3Schema: rootSchema(gvk.Kind, chartName, spec, status),
		},
		Subresources: &apiextv1.CustomResourceSubresources{
			Status: &apiextv1.CustomResourceSubresourceStatus{},
		},
	}

	if info.replicasPath != "" {
		field, err := specField(spec, info.replicasPath)
		if err == nil && field.Type != "integer" {
			err = fmt.Errorf("%s must be an integer", info.replicasPath)
		}
		switch {
		case err != nil && strict:
			return version, fmt.Errorf("%s: %w", AnnotationReplicasPath, err)
		case err == nil:
			addScale(&version, info.replicasPath)
		}
	}
	for _, c := range info.columns {
		field, err := columnField(spec, &status, c.path)
		switch {
		case err != nil && strict:
			return version, fmt.Errorf("%s: column %s: %w", AnnotationPrinterColumns, c.name, err)
		case err == nil:
			version.AdditionalPrinterColumns = append(version.AdditionalPrinterColumns, apiextv1.CustomResourceColumnDefinition{
				Name: c.name, Type: columnType(field), JSONPath: c.path, Description: field.Description,
			})
		}
	}
	version.AdditionalPrinterColumns = append(version.AdditionalPrinterColumns, commonColumns()...)
	return version, nil
}

// addScale gives version the scale subresource on the replicas field at path, with the
// columns that show it. The sidecar reports status.replicas and status.selector, so that
// kubectl scale and autoscalers work on the custom resource itself.
func addScale(version *apiextv1.CustomResourceDefinitionVersion, path string) {
	version.Subresources.Scale = &apiextv1.CustomResourceSubresourceScale{
		SpecReplicasPath:   path,
		StatusReplicasPath: statuscontract.FieldJSONPath(statuscontract.FieldReplicas),
		LabelSelectorPath:  ptr(statuscontract.FieldJSONPath(statuscontract.FieldSelector)),
	}
	version.AdditionalPrinterColumns = append(version.AdditionalPrinterColumns,
		apiextv1.CustomResourceColumnDefinition{
			Name: "Desired", Type: "integer", JSONPath: path,
			Description: "Desired number of replicas.",
		},
		apiextv1.CustomResourceColumnDefinition{
			Name: "Available", Type: "integer", JSONPath: statuscontract.FieldJSONPath(statuscontract.FieldAvailableReplicas),
			Description: "Available replicas of the resource's workloads, as the sidecar last saw them.",
		})
}

// commonColumns are the printer columns of every kind, read from the status and metadata
// the operator writes for all of them.
func commonColumns() []apiextv1.CustomResourceColumnDefinition {
	return []apiextv1.CustomResourceColumnDefinition{
		{
			Name: "Chart", Type: "string", JSONPath: statuscontract.FieldJSONPath(statuscontract.FieldChart, statuscontract.FieldChartVersion),
			Description: "Version of the chart of the resource's Helm release (docs/rollouts.md).",
		},
		{
			Name: "Rollout", Type: "string", JSONPath: statuscontract.ConditionJSONPath(statuscontract.ChartRollout, "reason"),
			Description: "Where the resource stands in the rollout of the chart the operator carries: Upgraded, Waiting, Upgrading, RolloutHalted, RolloutFailed.",
		},
		{
			Name: "Ready", Type: "string", JSONPath: statuscontract.ConditionJSONPath(statuscontract.Ready, "status"),
			Description: "Whether the spec of this generation is deployed and its workloads have rolled out.",
		},
		{
			Name: "Reason", Type: "string", JSONPath: statuscontract.ConditionJSONPath(statuscontract.Ready, "reason"),
			Description: "Why the resource is or is not ready; the Ready condition's message says more.",
		},
		{
			Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
		},
	}
}
