{{/*
Names and labels.
*/}}
{{- define "icemv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "icemv.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "icemv.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "icemv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "icemv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "icemv.labels" -}}
helm.sh/chart: {{ include "icemv.chart" . }}
{{ include "icemv.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: daemon
{{- end }}

{{- define "icemv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "icemv.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "icemv.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
Where the config file is mounted; the container's args point icemv at it.
*/}}
{{- define "icemv.configDir" -}}/etc/icemv{{- end }}
{{- define "icemv.configFile" -}}{{ include "icemv.configDir" . }}/config.yaml{{- end }}

{{/*
The embedded catalog: a PostgreSQL inside the pod, so one replica and no rolling overlap.
*/}}
{{- define "icemv.embeddedCatalog" -}}
{{- if eq (toString .Values.config.catalog.uri) "embedded" }}true{{ end }}
{{- end }}

{{/*
terminationGracePeriodSeconds: icemv's shutdown grace (refresh.shutdown_grace_seconds,
60 s when unset, as in icemv) plus the margin.
*/}}
{{- define "icemv.terminationGracePeriodSeconds" -}}
{{- $grace := 60.0 }}
{{- if hasKey .Values.config "refresh" }}
{{- if hasKey .Values.config.refresh "shutdown_grace_seconds" }}
{{- $grace = .Values.config.refresh.shutdown_grace_seconds }}
{{- end }}
{{- end }}
{{- add (ceil $grace | int) (.Values.terminationGracePeriodMarginSeconds | int) }}
{{- end }}

{{/*
Secrets: for each password, the Secret name and key to read it from, or nothing.
*/}}
{{- define "icemv.secretRef" -}}
{{- $spec := index .root.Values.secrets .name }}
{{- if and $spec.existingSecret $spec.value }}
{{- fail (printf "secrets.%s: set either existingSecret or value, not both" .name) }}
{{- end }}
{{- if $spec.existingSecret }}
name: {{ $spec.existingSecret }}
key: {{ $spec.existingSecretKey }}
{{- else if $spec.value }}
name: {{ include "icemv.fullname" .root }}
key: {{ .key }}
{{- end }}
{{- end }}

{{- define "icemv.createSecret" -}}
{{- if or (and .Values.secrets.catalogPassword.value (not .Values.secrets.catalogPassword.existingSecret)) (and .Values.secrets.kafkaSaslPassword.value (not .Values.secrets.kafkaSaslPassword.existingSecret)) }}true{{ end }}
{{- end }}

{{/*
Prometheus series selector for this release's metrics.
*/}}
{{- define "icemv.metricSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q,namespace=%q" (include "icemv.fullname" .) .Release.Namespace) }}
{{- end }}

{{/*
Checks that stop a broken install early, with the key to fix in the message.
*/}}
{{- define "icemv.validate" -}}
{{- $config := .Values.config }}
{{- $metrics := $config.metrics | default dict }}
{{- $host := toString ($metrics.host | default "127.0.0.1") }}
{{- if or (hasPrefix "127." $host) (eq $host "localhost") (eq $host "::1") }}
{{- fail (printf "config.metrics.host=%s: the kubelet's probes and Prometheus reach the pod IP; use 0.0.0.0 (or ::)" $host) }}
{{- end }}
{{- if and (hasKey $config "catalog") (hasKey ($config.catalog | default dict) "password") }}
{{- fail "config.catalog.password: the config is a ConfigMap; use secrets.catalogPassword" }}
{{- end }}
{{- if and (hasKey $config "kafka") (hasKey ($config.kafka | default dict) "sasl_password") }}
{{- fail "config.kafka.sasl_password: the config is a ConfigMap; use secrets.kafkaSaslPassword" }}
{{- end }}
{{- if and (include "icemv.embeddedCatalog" .) (gt (int .Values.replicaCount) 1) }}
{{- fail "config.catalog.uri=embedded runs a private PostgreSQL in the pod: replicaCount must be 1 (use a shared postgresql:// catalog to scale)" }}
{{- end }}
{{- end }}
