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

{{/*
Every secret the chart passes: values key -> [environment variable, key in the chart's Secret].
*/}}
{{- define "icemv.secretEnv" -}}
catalogPassword: [ICEMV_CATALOG__PASSWORD, catalog-password]
kafkaSaslPassword: [ICEMV_KAFKA__SASL_PASSWORD, kafka-sasl-password]
catalogCredential: [ICEMV_CATALOG__CREDENTIAL, catalog-credential]
catalogToken: [ICEMV_CATALOG__TOKEN, catalog-token]
{{- end }}

{{- define "icemv.createSecret" -}}
{{- range $name, $_ := include "icemv.secretEnv" . | fromYaml }}
{{- $spec := index $.Values.secrets $name }}
{{- if and $spec $spec.value (not $spec.existingSecret) }}true{{ end }}
{{- end }}
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
{{- /* catalog credential, token and headers: values.schema.json refuses them */}}
{{- range $section := list "catalog" "warehouse" }}
{{- range $key, $_ := (index ($.Values.config | default dict) $section | default dict).properties | default dict }}
{{- if or (has $key (list "s3.access-key-id" "s3.secret-access-key" "s3.session-token" "credential" "token")) (hasPrefix "header." $key) }}
{{- fail (printf "config.%s.properties.%s: the config is a ConfigMap; pass it from a Secret (AWS_* variables or ICEMV_* in extraEnv, or secrets.*)" $section $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (include "icemv.sparkOnKubernetes" .) (gt (int .Values.replicaCount) 1) }}
{{- fail "sparkOnKubernetes.enabled: the icemv pod is the one Spark driver its executors connect to (through one headless Service): replicaCount must be 1 (scale with sparkOnKubernetes.executor.instances)" }}
{{- end }}
{{- if and (include "icemv.embeddedCatalog" .) (gt (int .Values.replicaCount) 1) }}
{{- fail "config.catalog.uri=embedded runs a private PostgreSQL in the pod: replicaCount must be 1 (use a shared postgresql:// catalog to scale)" }}
{{- end }}
{{- end }}

{{/*
Spark on Kubernetes: the icemv pod is Spark's client-mode driver, executors are pods of the
same image. Names of its parts, and the settings it adds to config.spark.
*/}}
{{- define "icemv.sparkOnKubernetes" -}}
{{- if .Values.sparkOnKubernetes.enabled }}true{{ end }}
{{- end }}

{{- define "icemv.driverServiceName" -}}
{{- printf "%s-driver" (include "icemv.fullname" . | trunc 56 | trimSuffix "-") }}
{{- end }}

{{- define "icemv.executorPodTemplateFile" -}}{{ include "icemv.configDir" . }}/executor-pod-template.yaml{{- end }}
{{- define "icemv.executorContainerName" -}}spark-executor{{- end }}

{{- define "icemv.executorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-spark-executor" (include "icemv.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: {{ include "icemv.name" . }}
app.kubernetes.io/component: spark-executor
{{- end }}

{{/*
The icemv configuration file: .Values.config, plus in Spark-on-Kubernetes mode spark.master and
the spark.conf entries that mode needs (entries of config.spark.conf win). The driver's pod name
is per pod and comes from the environment (ICEMV_SPARK__CONF__spark.kubernetes.driver.pod.name).
*/}}
{{- define "icemv.config" -}}
{{- $config := deepCopy .Values.config }}
{{- if include "icemv.sparkOnKubernetes" . }}
{{- $k8s := .Values.sparkOnKubernetes }}
{{- $executor := $k8s.executor }}
{{- $spark := $config.spark | default dict }}
{{- $conf := dict
  "spark.kubernetes.namespace" .Release.Namespace
  "spark.kubernetes.container.image" (include "icemv.image" .)
  "spark.kubernetes.container.image.pullPolicy" .Values.image.pullPolicy
  "spark.kubernetes.authenticate.driver.serviceAccountName" (include "icemv.serviceAccountName" .)
  "spark.kubernetes.executor.podTemplateFile" (include "icemv.executorPodTemplateFile" .)
  "spark.kubernetes.executor.podTemplateContainerName" (include "icemv.executorContainerName" .)
  "spark.kubernetes.executor.deleteOnTermination" "true"
  "spark.driver.host" (printf "%s.%s.svc" (include "icemv.driverServiceName" .) .Release.Namespace)
  "spark.driver.bindAddress" "0.0.0.0"
  "spark.driver.port" (printf "%d" (int $k8s.driverPort))
  "spark.driver.blockManager.port" (printf "%d" (int $k8s.blockManagerPort))
  "spark.blockManager.port" (printf "%d" (int $k8s.blockManagerPort))
  "spark.executor.instances" (printf "%d" (int $executor.instances))
  "spark.executor.cores" (printf "%d" (int $executor.cores))
  "spark.executor.memory" (toString $executor.memory)
}}
{{- with $executor.requestCores }}
{{- $_ := set $conf "spark.kubernetes.executor.request.cores" (toString .) }}
{{- end }}
{{- with $executor.limitCores }}
{{- $_ := set $conf "spark.kubernetes.executor.limit.cores" (toString .) }}
{{- end }}
{{- if $k8s.secureRpc }}
{{- $_ := set $conf "spark.authenticate" "true" }}
{{- $_ := set $conf "spark.network.crypto.enabled" "true" }}
{{- end }}
{{- $_ := set $spark "master" (printf "k8s://%s" $k8s.apiServer) }}
{{- $_ := set $spark "conf" (merge (deepCopy ($spark.conf | default dict)) $conf) }}
{{- $_ := set $config "spark" $spark }}
{{- end }}
{{- toYaml $config }}
{{- end }}
