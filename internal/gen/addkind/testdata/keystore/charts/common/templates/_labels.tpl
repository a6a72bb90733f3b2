{{/* Labels of every object: the standard ones and customLabels, rendered as templates. */}}
{{- define "common.labels.standard" -}}
{{- $default := dict "app.kubernetes.io/name" (include "common.names.name" .context) "helm.sh/chart" (printf "%s-%s" .context.Chart.Name .context.Chart.Version) "app.kubernetes.io/instance" .context.Release.Name "app.kubernetes.io/managed-by" .context.Release.Service -}}
{{- with .context.Chart.AppVersion -}}
{{- $_ := set $default "app.kubernetes.io/version" . -}}
{{- end -}}
{{ template "common.tplvalues.merge" (dict "values" (list .customLabels $default) "context" .context) }}
{{- end -}}

{{/* Labels a selector matches, which never change. */}}
{{- define "common.labels.matchLabels" -}}
{{- $default := dict "app.kubernetes.io/name" (include "common.names.name" .context) "app.kubernetes.io/instance" .context.Release.Name -}}
{{ template "common.tplvalues.merge" (dict "values" (list (pick (include "common.tplvalues.render" (dict "value" .customLabels "context" .context) | fromYaml) "app.kubernetes.io/name" "app.kubernetes.io/instance") $default) "context" .context) }}
{{- end -}}
