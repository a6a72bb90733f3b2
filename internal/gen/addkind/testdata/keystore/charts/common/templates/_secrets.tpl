{{/*
The base64-encoded password of key in the Secret named secret: the value provided, else the
one the Secret already holds, else a random one of length. Looking the Secret up keeps the
generated password across upgrades (a new one at each render would change the Secret at
each upgrade, and an operator, which renders at each reconcile, would upgrade for ever).
Usage:
{{ include "common.secrets.passwords.manage" (dict "secret" "name" "key" "password" "providedValue" .Values.password "length" 10 "context" $) }}
*/}}
{{- define "common.secrets.passwords.manage" -}}
{{- $existing := (lookup "v1" "Secret" (include "common.names.namespace" .context) .secret).data | default dict -}}
{{- if .providedValue -}}
{{- .providedValue | toString | b64enc | quote -}}
{{- else if hasKey $existing .key -}}
{{- index $existing .key | quote -}}
{{- else -}}
{{- randAlphaNum (.length | int) | b64enc | quote -}}
{{- end -}}
{{- end -}}
