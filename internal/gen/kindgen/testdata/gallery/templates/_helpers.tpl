{{- define "gallery.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gallery.labels" -}}
app.kubernetes.io/name: gallery
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
