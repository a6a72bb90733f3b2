{{/* The image of the server, with the global registry if one is set. */}}
{{- define "keystore.image" -}}
{{- include "common.images.image" (dict "imageRoot" .Values.image "global" .Values.global) -}}
{{- end -}}

{{/* The name of the Secret with the password. */}}
{{- define "keystore.secretName" -}}
{{- include "common.names.fullname" . -}}
{{- end -}}
