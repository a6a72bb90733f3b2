{{/* The image registry/repository:tag, with global.imageRegistry if set. */}}
{{- define "common.images.image" -}}
{{- $registry := .imageRoot.registry -}}
{{- if and .global .global.imageRegistry -}}
{{- $registry = .global.imageRegistry -}}
{{- end -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry .imageRoot.repository (toString .imageRoot.tag) -}}
{{- else -}}
{{- printf "%s:%s" .imageRoot.repository (toString .imageRoot.tag) -}}
{{- end -}}
{{- end -}}
