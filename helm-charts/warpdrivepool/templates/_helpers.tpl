{{/*
Name of the pool's namespaced objects. A StatefulSet's pods carry the label
controller-revision-hash=<name>-<10-character hash>, and label values are limited to
63 characters, so the name is cut to 52 (only a 53-character release name is cut).
*/}}
{{- define "warpdrivepool.fullname" -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the pool's StorageClass: storageClassName; else <namespace>.<release name>, which no
pool of another namespace can take (a namespace name has no dot); but a pool installed when
the default was the release name keeps that class, which its claims name. lookup reads a
cluster-scoped object only if this release owns it (the operator's confinement), so the class
of a pool of the same name in another namespace reads as absent.
*/}}
{{- define "warpdrivepool.storageClassName" -}}
{{- if .Values.storageClassName }}
{{- .Values.storageClassName }}
{{- else if lookup "storage.k8s.io/v1" "StorageClass" "" .Release.Name }}
{{- .Release.Name }}
{{- else }}
{{- printf "%s.%s" .Release.Namespace .Release.Name }}
{{- end }}
{{- end }}

{{/*
Labels that select the pool servers. They must never change: a StatefulSet's selector is
immutable.
*/}}
{{- define "warpdrivepool.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "warpdrivepool.labels" -}}
{{ include "warpdrivepool.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{/*
The capacity as a string, after a check the schema cannot express: a quantity that parses
to zero ("0", "0Gi", "0.0Ti", "0e3") matches the quantity pattern, but a pool of no
capacity is a mistake. A quantity is zero exactly when its digits before the suffix or
exponent are all zeros.
*/}}
{{- define "warpdrivepool.capacity" -}}
{{- $capacity := toString .Values.capacity }}
{{- $mantissa := regexFind "^[+]?[0-9.]*" $capacity }}
{{- if not (regexMatch "[1-9]" $mantissa) }}
{{- fail "capacity must be greater than zero" }}
{{- end }}
{{- $capacity }}
{{- end }}

{{/*
Security settings of the pool servers: they satisfy the "restricted" Pod Security Standard.
*/}}
{{- define "warpdrivepool.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "warpdrivepool.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}
