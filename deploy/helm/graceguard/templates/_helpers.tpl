{{/* The chart name, overridable. */}}
{{- define "graceguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every resource name: <release>-graceguard, or the release name when it already
contains the chart name. */}}
{{- define "graceguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "graceguard.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "graceguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "graceguard.labels" -}}
helm.sh/chart: {{ include "graceguard.chart" . }}
{{ include "graceguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: graceguard
{{- end -}}

{{/* Labels that select the controller pods. */}}
{{- define "graceguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "graceguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "graceguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "graceguard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "graceguard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The SQLite ledger URL (SQLAlchemy form, absolute path). */}}
{{- define "graceguard.sqliteUrl" -}}
{{- printf "sqlite:///%s/%s" (.Values.ledger.sqlite.dir | trimSuffix "/") .Values.ledger.sqlite.file -}}
{{- end -}}

{{/* Refuse values that cannot work, with a message saying what to change. */}}
{{- define "graceguard.validate" -}}
{{- if .Values.webhook.enabled -}}
{{- if not (has .Values.webhook.failurePolicy (list "Fail" "Ignore")) -}}
{{- fail (printf "webhook.failurePolicy: expected Fail or Ignore, got %q" .Values.webhook.failurePolicy) -}}
{{- end -}}
{{- $t := int .Values.webhook.timeoutSeconds -}}
{{- if or (lt $t 1) (gt $t 30) -}}
{{- fail (printf "webhook.timeoutSeconds: expected 1 to 30, got %v" .Values.webhook.timeoutSeconds) -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.ledger.type (list "sqlite" "postgresql")) -}}
{{- fail (printf "ledger.type: expected sqlite or postgresql, got %q" .Values.ledger.type) -}}
{{- end -}}
{{- if and (eq .Values.ledger.type "postgresql") (not .Values.ledger.postgresql.existingSecret) -}}
{{- fail "ledger.postgresql.existingSecret: name the Secret holding the PostgreSQL URL (ledger.type is postgresql)" -}}
{{- end -}}
{{- $p := .Values.ledger.sqlite.persistence -}}
{{- if and (eq .Values.ledger.type "sqlite") $p.enabled (not $p.existingClaim) (gt (int .Values.replicas) 1) (not (has "ReadWriteMany" $p.accessModes)) -}}
{{- fail (printf "ledger.sqlite.persistence: %v replicas cannot share the ledger's ReadWriteOnce claim; set replicas: 1, or ledger.type: postgresql (one history for a standby controller), or accessModes: [ReadWriteMany], or persistence.enabled: false (each replica its own file on an emptyDir, lost with its pod)" .Values.replicas) -}}
{{- end -}}
{{- end -}}


{{/* The webhook's resources and labels. */}}
{{- define "graceguard.webhook.fullname" -}}
{{- printf "%s-webhook" (include "graceguard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "graceguard.webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "graceguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "graceguard.webhook.labels" -}}
helm.sh/chart: {{ include "graceguard.chart" . }}
{{ include "graceguard.webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: graceguard
{{- end -}}

{{- define "graceguard.webhook.serviceAccountName" -}}
{{- default (include "graceguard.webhook.fullname" .) .Values.webhook.serviceAccount.name -}}
{{- end -}}

{{/* The Secret holding the serving certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "graceguard.webhook.tlsSecret" -}}
{{- printf "%s-tls" (include "graceguard.webhook.fullname" .) -}}
{{- end -}}

{{/* The username the apiserver gives the controller: its evictions are always admitted. */}}
{{- define "graceguard.controllerUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "graceguard.serviceAccountName" .) -}}
{{- end -}}

{{/* The ConfigMaps where a new leader finds what the last one left (the controller's
--window-evictions and --notify-outbox). */}}
{{- define "graceguard.windowEvictions" -}}
{{- printf "%s-window-evictions" (include "graceguard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "graceguard.notifyOutbox" -}}
{{- printf "%s-notify-outbox" (include "graceguard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
