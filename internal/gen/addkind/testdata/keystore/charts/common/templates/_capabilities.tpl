{{/* The Kubernetes version: .Capabilities', or global.kubeVersion when set. */}}
{{- define "common.capabilities.kubeVersion" -}}
{{- default .Capabilities.KubeVersion.Version (and .Values.global .Values.global.kubeVersion) -}}
{{- end -}}

{{/* The apiVersion of StatefulSet the cluster serves. */}}
{{- define "common.capabilities.statefulset.apiVersion" -}}
{{- if semverCompare "<1.14-0" (include "common.capabilities.kubeVersion" .) -}}
{{- print "apps/v1beta1" -}}
{{- else -}}
{{- print "apps/v1" -}}
{{- end -}}
{{- end -}}

{{/* The apiVersion of PodDisruptionBudget the cluster serves. */}}
{{- define "common.capabilities.policy.apiVersion" -}}
{{- if .Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget" -}}
{{- print "policy/v1" -}}
{{- else -}}
{{- print "policy/v1beta1" -}}
{{- end -}}
{{- end -}}
