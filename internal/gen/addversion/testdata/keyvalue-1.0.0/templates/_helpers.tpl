{{- define "keyvalue.labels" -}}
app.kubernetes.io/name: keyvalue
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- define "keyvalue.selector" -}}
app.kubernetes.io/name: keyvalue
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
