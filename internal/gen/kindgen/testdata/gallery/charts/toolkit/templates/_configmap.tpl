{{/* A whole ConfigMap: name, data and the top context in a dict. */}}
{{- define "toolkit.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}
  namespace: {{ .top.Release.Namespace }}
data:
  {{- toYaml .data | nindent 2 }}
{{- end -}}
