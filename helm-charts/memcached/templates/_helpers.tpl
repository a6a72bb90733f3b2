{{/*
Name of the release's objects (a release name is at most 53 characters).
*/}}
{{- define "memcached.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels that select the release's pods. They must never change: a Deployment's selector is
immutable.
*/}}
{{- define "memcached.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "memcached.labels" -}}
{{ include "memcached.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{/*
Security settings of the pods: they satisfy the "restricted" Pod Security Standard.
*/}}
{{- define "memcached.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "memcached.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/*
The file of memcached's --auth-file: one user:password line.
*/}}
{{- define "memcached.authFile" -}}
{{ printf "%s:%s\n" .Values.auth.username .Values.auth.password }}
{{- end }}
