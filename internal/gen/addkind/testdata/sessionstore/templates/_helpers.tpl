{{/* The name of the release's objects, at most 63 characters. */}}
{{- define "sessionstore.fullname" -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels every object has. */}}
{{- define "sessionstore.labels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels that select the pods. */}}
{{- define "sessionstore.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The image of the server, with the global registry if one is set. */}}
{{- define "sessionstore.image" -}}
{{- $registry := default .Values.image.registry .Values.global.imageRegistry -}}
{{- printf "%s/%s:%s" $registry .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{/*
The resources of a preset, as catalogue charts size a container that sets no resources: each
preset requests ephemeral storage as well as CPU and memory, so that the pod schedules only on
a node that advertises some.
*/}}
{{- define "sessionstore.resources.preset" -}}
{{- $presets := dict
  "nano" (dict
    "requests" (dict "cpu" "100m" "memory" "128Mi" "ephemeral-storage" "50Mi")
    "limits" (dict "cpu" "150m" "memory" "192Mi" "ephemeral-storage" "2Gi"))
  "micro" (dict
    "requests" (dict "cpu" "250m" "memory" "256Mi" "ephemeral-storage" "50Mi")
    "limits" (dict "cpu" "375m" "memory" "384Mi" "ephemeral-storage" "2Gi"))
  "small" (dict
    "requests" (dict "cpu" "500m" "memory" "512Mi" "ephemeral-storage" "50Mi")
    "limits" (dict "cpu" "750m" "memory" "768Mi" "ephemeral-storage" "2Gi"))
-}}
{{- if hasKey $presets .type -}}
{{- index $presets .type | toYaml -}}
{{- else -}}
{{- printf "server.resourcesPreset %q is none of %s" .type (keys $presets | sortAlpha | join ", ") | fail -}}
{{- end -}}
{{- end -}}
