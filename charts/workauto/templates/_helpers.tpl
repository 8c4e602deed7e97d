{{/* Names: at most 63 characters (DNS labels), with the component's suffix always kept whole. */}}
{{- define "workauto.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "workauto.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* <fullname>-<component>, the fullname shortened so that the component fits: (dict "root" $ "component" "notes-tasks") */}}
{{- define "workauto.componentName" -}}
{{- $max := sub 62 (len .component) | int -}}
{{- printf "%s-%s" (include "workauto.fullname" .root | trunc $max | trimSuffix "-") .component -}}
{{- end -}}

{{- define "workauto.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "workauto.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "workauto.fullname" . | trunc 55 | trimSuffix "-")) -}}
{{- end -}}

{{/*
A workload's ServiceAccount (dict "root" $ "component" name): its own, <fullname>-<component>, so a
cloud identity binds to one service (serviceAccount.annotations, then the workload's own); with
serviceAccount.create false, serviceAccount.name (default `default`) for all.
*/}}
{{- define "workauto.serviceAccountName" -}}
{{- if .root.Values.serviceAccount.create -}}
{{- include "workauto.componentName" (dict "root" .root "component" .component) -}}
{{- else -}}
{{- default "default" .root.Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The migration Jobs' ServiceAccount: a pre-install hook runs before the release's own exists, so when
the chart makes one, the Jobs get a hook-made twin (same annotations, e.g. a cloud identity binding).
*/}}
{{- define "workauto.migrationsServiceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- include "workauto.componentName" (dict "root" . "component" "migrations") -}}
{{- else -}}
{{- include "workauto.serviceAccountName" (dict "root" . "component" "migrations") -}}
{{- end -}}
{{- end -}}

{{/* The image, under global.imageRegistry when set (a mirror: `registry.internal/ghcr.io/workauto/workauto` stays a path). */}}
{{- define "workauto.image" -}}
{{- $repository := .Values.image.repository -}}
{{- with .Values.global.imageRegistry }}{{ $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "workauto.labels" -}}
helm.sh/chart: {{ include "workauto.chart" . }}
app.kubernetes.io/name: {{ include "workauto.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: workauto
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* (dict "root" $ "component" "gateway") */}}
{{- define "workauto.selectorLabels" -}}
app.kubernetes.io/name: {{ include "workauto.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
A workload's settings: its own deep-merged over the defaults (dict "root" $ "own" $svc). Maps merge
key by key (resources.limits.memory alone keeps the default requests and CPU limit; env adds to
defaults.env); lists and scalars replace the default's.
*/}}
{{- define "workauto.settings" -}}
{{- toYaml (mergeOverwrite (deepCopy .root.Values.defaults) (deepCopy .own)) -}}
{{- end -}}

{{- define "workauto.kafkaNamespace" -}}
{{- $ns := .Values.kafka.namespace -}}
{{- if eq $ns "-" -}}{{- else if $ns -}}{{ $ns }}{{- else -}}{{ printf "%s." .Release.Name }}{{- end -}}
{{- end -}}

{{- define "workauto.secretRef" -}}
valueFrom: { secretKeyRef: { name: {{ include "workauto.secretName" .root }}, key: {{ .key }}{{ if .optional }}, optional: true{{ end }} } }
{{- end -}}

{{/* Environment every process shares: logging, database timeout, telemetry, Kafka. (dict "root" $ "component" name) */}}
{{- define "workauto.commonEnv" -}}
{{- $root := .root -}}
- name: LOG_LEVEL
  value: {{ $root.Values.logLevel | quote }}
- name: DATABASE_STATEMENT_TIMEOUT_MS
  value: {{ $root.Values.databaseStatementTimeoutMs | quote }}
- name: DATABASE_POOL_MAX
  value: {{ .cfg.databasePoolMax | int | quote }}
- name: K8S_POD_NAME
  valueFrom: { fieldRef: { fieldPath: metadata.name } }
- name: K8S_NAMESPACE_NAME
  valueFrom: { fieldRef: { fieldPath: metadata.namespace } }
- name: K8S_NODE_NAME
  valueFrom: { fieldRef: { fieldPath: spec.nodeName } }
{{- if $root.Values.metrics.enabled }}
- name: METRICS_PORT
  value: {{ $root.Values.metrics.port | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ .component | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "service.namespace=workauto,service.version={{ $root.Values.image.tag | default $root.Chart.AppVersion }},k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE_NAME),k8s.node.name=$(K8S_NODE_NAME),k8s.deployment.name={{ include "workauto.componentName" (dict "root" $root "component" .component) }}{{ with $root.Values.otel.resourceAttributes }},{{ . }}{{ end }}"
{{- with $root.Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with $root.Values.otel.sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- with $root.Values.otel.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
How the services authenticate to Kafka, from kafka.tls, kafka.sasl and kafka.strimzi.user (a
Strimzi-made user's Secret holds password and sasl.jaas.config, or user.crt and user.key: the
username is the KafkaUser's name). YAML: tls, caSecret, caKey, clientSecret, certKey, keyKey,
mechanism, username, usernameSecret, usernameKey, passwordSecret, passwordKey, tokenSecret, tokenKey.
*/}}
{{- define "workauto.kafkaAuth" -}}
{{- $k := .Values.kafka -}}
{{- $a := dict "tls" $k.tls.enabled "caSecret" $k.tls.caSecret "caKey" $k.tls.caKey "clientSecret" $k.tls.clientSecret "certKey" $k.tls.certKey "keyKey" $k.tls.keyKey "mechanism" $k.sasl.mechanism -}}
{{- $user := $k.strimzi.user -}}
{{- if $user.enabled -}}
{{- $name := include "workauto.kafkaUserName" . -}}
{{- if or $k.sasl.mechanism $k.tls.clientSecret -}}
{{- fail "kafka.strimzi.user makes the Kafka credentials: leave kafka.sasl.mechanism and kafka.tls.clientSecret empty" -}}
{{- end -}}
{{- if eq $user.authentication "tls" -}}
{{- if not $k.tls.enabled }}{{ fail "kafka.strimzi.user.authentication=tls needs kafka.tls.enabled (client certificates are a TLS feature)" }}{{ end -}}
{{- $_ := set $a "clientSecret" $name -}}{{- $_ := set $a "certKey" "user.crt" -}}{{- $_ := set $a "keyKey" "user.key" -}}
{{- else -}}
{{- $_ := set $a "mechanism" "scram-sha-512" -}}{{- $_ := set $a "username" $name -}}
{{- $_ := set $a "passwordSecret" $name -}}{{- $_ := set $a "passwordKey" "password" -}}
{{- end -}}
{{- else if $a.mechanism -}}
{{- $secret := required "kafka.sasl.existingSecret is required with kafka.sasl.mechanism" $k.sasl.existingSecret -}}
{{- if eq $a.mechanism "oauthbearer" -}}
{{- $_ := set $a "tokenSecret" $secret -}}{{- $_ := set $a "tokenKey" $k.sasl.tokenKey -}}
{{- else -}}
{{- if $k.sasl.username }}{{ $_ := set $a "username" $k.sasl.username }}{{ else }}{{ $_ := set $a "usernameSecret" $secret }}{{ $_ := set $a "usernameKey" $k.sasl.usernameKey }}{{ end -}}
{{- $_ := set $a "passwordSecret" $secret -}}{{- $_ := set $a "passwordKey" $k.sasl.passwordKey -}}
{{- end -}}
{{- end -}}
{{- if and $a.clientSecret (not $k.tls.enabled) }}{{ fail "kafka.tls.clientSecret needs kafka.tls.enabled" }}{{ end -}}
{{- toYaml $a -}}
{{- end -}}

{{/* <fullname>-kafka: the User Operator's Secret of that name must not meet the chart's or yours. */}}
{{- define "workauto.kafkaUserName" -}}{{ include "workauto.componentName" (dict "root" . "component" "kafka") }}{{- end -}}

{{/* Topics as the services name them (libs/events TOPICS, after KAFKA_NAMESPACE), by a short key. */}}
{{- define "workauto.kafkaTopics" -}}
{{- $ns := include "workauto.kafkaNamespace" . -}}
audit: {{ printf "%sworkauto.audit.v1" $ns }}
domain-events: {{ printf "%sworkauto.domain-events.v1" $ns }}
dead-letter: {{ printf "%sworkauto.dead-letter.v1" $ns }}
{{- end -}}

{{/* The services create their topics unless told not to, or unless the chart makes them (Strimzi). */}}
{{- define "workauto.kafkaCreateTopics" -}}
{{- and .Values.kafka.createTopics (not .Values.kafka.strimzi.topics.enabled) -}}
{{- end -}}

{{/*
Kafka's variables (services only: the gateway publishes no events). A migration Job ("job") gets no
credentials: migrating never connects to Kafka, and a Strimzi-made user's Secret does not exist yet
when a pre-install hook runs. (dict "root" $ "job" bool)
*/}}
{{- define "workauto.kafkaEnv" -}}
{{- $k := .root.Values.kafka }}
{{- $a := include "workauto.kafkaAuth" .root | fromYaml }}
- name: KAFKA_BROKERS
  value: {{ required "kafka.brokers is required (host:port[,…])" $k.brokers | quote }}
- name: KAFKA_NAMESPACE
  value: {{ include "workauto.kafkaNamespace" .root | quote }}
- name: KAFKA_CREATE_TOPICS
  value: {{ include "workauto.kafkaCreateTopics" .root | quote }}
- name: KAFKA_TOPIC_PARTITIONS
  value: {{ $k.topicPartitions | quote }}
- name: KAFKA_TOPIC_REPLICATION_FACTOR
  value: {{ $k.topicReplicationFactor | quote }}
- name: KAFKA_TOPIC_RETENTION_MS
  value: {{ $k.topicRetentionMs | quote }}
{{- if not .job }}
{{- if $a.tls }}
- name: KAFKA_TLS
  value: "true"
{{- if $a.caSecret }}
- name: KAFKA_TLS_CA_FILE
  value: /etc/workauto/kafka-ca/{{ $a.caKey }}
{{- end }}
{{- if $a.clientSecret }}
- name: KAFKA_TLS_CERT_FILE
  value: /etc/workauto/kafka-client/{{ $a.certKey }}
- name: KAFKA_TLS_KEY_FILE
  value: /etc/workauto/kafka-client/{{ $a.keyKey }}
{{- end }}
{{- end }}
{{- with $a.mechanism }}
- name: KAFKA_SASL_MECHANISM
  value: {{ . | quote }}
{{- end }}
{{- if $a.tokenSecret }}
- name: KAFKA_SASL_OAUTHBEARER_TOKEN_FILE
  value: /etc/workauto/kafka-token/{{ $a.tokenKey }}
{{- end }}
{{- if $a.username }}
- name: KAFKA_SASL_USERNAME
  value: {{ $a.username | quote }}
{{- else if $a.usernameSecret }}
- name: KAFKA_SASL_USERNAME
  valueFrom: { secretKeyRef: { name: {{ $a.usernameSecret }}, key: {{ $a.usernameKey }} } }
{{- end }}
{{- if $a.passwordSecret }}
- name: KAFKA_SASL_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ $a.passwordSecret }}, key: {{ $a.passwordKey }} } }
{{- end }}
{{- end }}
{{- end -}}

{{- define "workauto.kafkaVolumeMounts" -}}
{{- $a := include "workauto.kafkaAuth" . | fromYaml }}
{{- if and $a.tls $a.caSecret }}
- name: kafka-ca
  mountPath: /etc/workauto/kafka-ca
  readOnly: true
{{- end }}
{{- if $a.clientSecret }}
- name: kafka-client
  mountPath: /etc/workauto/kafka-client
  readOnly: true
{{- end }}
{{- if $a.tokenSecret }}
- name: kafka-token
  mountPath: /etc/workauto/kafka-token
  readOnly: true
{{- end }}
{{- end -}}

{{- define "workauto.kafkaVolumes" -}}
{{- $a := include "workauto.kafkaAuth" . | fromYaml }}
{{- if and $a.tls $a.caSecret }}
- name: kafka-ca
  secret: { secretName: {{ $a.caSecret }} }
{{- end }}
{{- if $a.clientSecret }}
- name: kafka-client
  secret: { secretName: {{ $a.clientSecret }} }
{{- end }}
{{- if $a.tokenSecret }}
- name: kafka-token
  secret: { secretName: {{ $a.tokenSecret }} }
{{- end }}
{{- end -}}

{{/* A workload's own env: plain values (empty ones left out), then extraEnv. (dict "cfg" $cfg), output starts with a newline */}}
{{- define "workauto.workloadEnv" -}}
{{- range $name, $value := .cfg.env }}
{{- if or (kindIs "bool" $value) (kindIs "float64" $value) (kindIs "int64" $value) $value }}
{{- /* A whole number stays one: YAML's 86400000 is a float to Helm, which would print 8.64e+07. */}}
{{- $text := $value | toString }}
{{- if and (kindIs "float64" $value) (eq $value (floor $value)) }}{{ $text = $value | int64 | toString }}{{ end }}
- name: {{ $name }}
  value: {{ $text | quote }}
{{- end }}
{{- end }}
{{- with .cfg.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Pod-level spec shared by every Deployment (not the containers).
(dict "root" $ "component" name "cfg" $cfg)
*/}}
{{- define "workauto.podSpec" -}}
{{- $root := .root -}}
serviceAccountName: {{ if .job }}{{ include "workauto.migrationsServiceAccountName" $root }}{{ else }}{{ include "workauto.serviceAccountName" . }}{{ end }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext: {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
terminationGracePeriodSeconds: {{ .cfg.terminationGracePeriodSeconds }}
{{- with .cfg.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if .job }}
restartPolicy: Never
{{- else }}
topologySpreadConstraints:
{{- if .cfg.topologySpreadConstraints }}
{{- toYaml .cfg.topologySpreadConstraints | nindent 2 }}
{{- else }}
  {{- /* matchLabelKeys: during a rollout the new ReplicaSet's pods spread among themselves. */}}
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: {{ .cfg.topologySpread.zones }}
    labelSelector:
      matchLabels: {{- include "workauto.selectorLabels" . | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: {{ .cfg.topologySpread.nodes }}
    labelSelector:
      matchLabels: {{- include "workauto.selectorLabels" . | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
{{- end }}
{{- end }}
{{- with .cfg.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := deepCopy (.cfg.affinity | default dict) }}
{{- if and (not .job) .cfg.podAntiAffinity (not $affinity.podAntiAffinity) }}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "workauto.selectorLabels" . | fromYaml)) }}
{{- if eq .cfg.podAntiAffinity "hard" }}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
{{- else }}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- end }}
{{- end }}
{{- with $affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.initContainers }}
initContainers: {{- include "workauto.extraContainers" (dict "root" $root "containers" .) | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Secrets a workload reads only at start (env, certificates), comma-separated: a change needs a
restart. The OAUTHBEARER token is left out: it is read again at each authentication.
(dict "root" $ "component" name "cfg" $cfg)
*/}}
{{- define "workauto.startSecrets" -}}
{{- $a := include "workauto.kafkaAuth" .root | fromYaml -}}
{{- $names := list (include "workauto.secretName" .root) -}}
{{- with .database }}{{ with .existingSecret }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- if ne .component "gateway" -}}
{{- range list ($a.tls | ternary $a.caSecret "") $a.clientSecret $a.usernameSecret $a.passwordSecret }}{{ if . }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- end -}}
{{- range .cfg.extraVolumes }}{{ with .secret }}{{ $names = append $names .secretName }}{{ end }}{{ end -}}
{{- $names | uniq | join "," -}}
{{- end -}}

{{/* Deployment metadata and spec head, up to the pod template's spec. (dict "root" $ "component" name "cfg" $cfg) */}}
{{/*
KEDA (keda.enabled, webhooks and agents): a ScaledObject on the queue's depth as the workload exports
it (workauto_jobs_waiting{queue}, read from Prometheus), with CPU as a second trigger; KEDA makes the
HPA, so the chart makes none. (dict "root" $ "component" name "cfg" $cfg "keda" dict)
*/}}
{{- define "workauto.scaledObject" -}}
{{- if .keda.enabled }}
{{- $k := .keda }}
{{- $server := required (printf "services.%s.keda.serverAddress is required: the Prometheus that scrapes this release (e.g. http://prometheus-operated.monitoring:9090)" .component) $k.serverAddress }}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {{ include "workauto.componentName" . }}
  labels:
    {{- include "workauto.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  scaleTargetRef:
    name: {{ include "workauto.componentName" . }}
  minReplicaCount: {{ .cfg.autoscaling.minReplicas }}
  maxReplicaCount: {{ .cfg.autoscaling.maxReplicas }}
  pollingInterval: {{ $k.pollingInterval }}
  cooldownPeriod: {{ $k.cooldownPeriod }}
  {{- with .cfg.autoscaling.behavior }}
  advanced:
    horizontalPodAutoscalerConfig:
      behavior: {{- toYaml . | nindent 8 }}
  {{- end }}
  triggers:
    # Due jobs waiting in the queue, all pods together: one more pod per waitingPerReplica of them.
    - type: prometheus
      metadata:
        serverAddress: {{ $server | quote }}
        query: {{ printf "sum(workauto_jobs_waiting{%s, queue=%q})" (include "workauto.promSelector" .root) $k.queue | quote }}
        threshold: {{ $k.waitingPerReplica | quote }}
        ignoreNullValues: "true"
    - type: cpu
      metricType: Utilization
      metadata:
        value: {{ .cfg.autoscaling.targetCPUUtilizationPercentage | quote }}
{{- end }}
{{- end -}}

{{- define "workauto.deploymentHead" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "workauto.componentName" . }}
  labels:
    {{- include "workauto.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  {{- if $root.Values.secrets.reloader }}
  annotations:
    # Stakater Reloader rolls the pods when one of these Secrets changes.
    secret.reloader.stakater.com/reload: {{ include "workauto.startSecrets" . | quote }}
    {{- $configMaps := list }}
    {{- range .cfg.extraVolumes }}{{ with .configMap }}{{ $configMaps = append $configMaps .name }}{{ end }}{{ end }}
    {{- with $configMaps }}
    configmap.reloader.stakater.com/reload: {{ . | uniq | join "," | quote }}
    {{- end }}
  {{- end }}
spec:
  {{- if not (or .cfg.autoscaling.enabled .keda.enabled) }}
  replicas: {{ .cfg.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate: {{- toYaml .cfg.rollingUpdate | nindent 6 }}
  selector:
    matchLabels: {{- include "workauto.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "workauto.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
        {{- with .cfg.podLabels }}{{ toYaml . | nindent 8 }}{{ end }}
      {{- $annotations := deepCopy (.cfg.podAnnotations | default dict) }}
      {{- if not $root.Values.secrets.existingSecret }}
      {{- /* A changed Secret rolls the pods (env from a Secret is read only at start). */}}
      {{- $_ := set $annotations "checksum/secret" (include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum) }}
      {{- end }}
      {{- with $annotations }}
      annotations: {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* The PodDisruptionBudget and HorizontalPodAutoscaler of a workload. (dict "root" $ "component" name "cfg" $cfg) */}}
{{- define "workauto.availability" -}}
{{- if .cfg.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "workauto.componentName" . }}
  labels:
    {{- include "workauto.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- $min := .cfg.pdb.minAvailable | toString }}
  {{- if ne $min "" }}
  {{- $replicas := ternary .cfg.autoscaling.minReplicas .cfg.replicas .cfg.autoscaling.enabled | int }}
  {{- if and (not (hasSuffix "%" $min)) (ge (int $min) $replicas) }}
  {{- fail (printf "pdb.minAvailable %s leaves no pod of %s to evict: a node drain would wait forever. Set it below %s (%d), or use maxUnavailable" $min .component (ternary "autoscaling.minReplicas" "replicas" .cfg.autoscaling.enabled) $replicas) }}
  {{- end }}
  minAvailable: {{ if hasSuffix "%" $min }}{{ $min | quote }}{{ else }}{{ int $min }}{{ end }}
  {{- else }}
  maxUnavailable: {{ .cfg.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels: {{- include "workauto.selectorLabels" . | nindent 6 }}
{{- end }}
{{- if and .cfg.autoscaling.enabled (not .keda.enabled) }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "workauto.componentName" . }}
  labels:
    {{- include "workauto.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "workauto.componentName" . }}
  minReplicas: {{ .cfg.autoscaling.minReplicas }}
  maxReplicas: {{ .cfg.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target: { type: Utilization, averageUtilization: {{ .cfg.autoscaling.targetCPUUtilizationPercentage }} }
  {{- with .cfg.autoscaling.behavior }}
  behavior: {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
A probe: the chart's (a dict) with the workload's overrides merged over it (periodSeconds,
timeoutSeconds, failureThreshold…). (dict "probe" dict "overrides" dict)
*/}}
{{- define "workauto.probe" -}}
{{- toYaml (mergeOverwrite (deepCopy .probe) (deepCopy (.overrides | default dict))) -}}
{{- end -}}

{{/*
The startup probe's window must outlast what a process waits before it says why it cannot start
(STARTUP_TIMEOUT_MS, and MIGRATION_WAIT_TIMEOUT_MS with migrations.mode=job), or the kubelet
restarts the pod before its last log line names the cause. (dict "root" $ "component" name "cfg" $cfg)
*/}}
{{- define "workauto.checkStartupWindow" -}}
{{- $s := .root.Values.probes.startup -}}
{{- $window := mul $s.periodSeconds $s.failureThreshold 1000 -}}
{{- $env := .cfg.env | default dict -}}
{{- $wait := (get $env "STARTUP_TIMEOUT_MS") | default 300000 | int64 -}}
{{- if eq .root.Values.migrations.mode "job" }}{{ $wait = max $wait ((get $env "MIGRATION_WAIT_TIMEOUT_MS") | default 300000 | int64) }}{{ end -}}
{{- if le (int64 $window) $wait -}}
{{- fail (printf "probes.startup: periodSeconds × failureThreshold (%d s) must exceed what %s waits before it exits naming the cause (STARTUP_TIMEOUT_MS%s: %d s), or the kubelet restarts it first: raise failureThreshold above %d" (div $window 1000) .component (ternary " or MIGRATION_WAIT_TIMEOUT_MS" "" (eq .root.Values.migrations.mode "job")) (div $wait 1000) (div $wait (mul $s.periodSeconds 1000))) -}}
{{- end -}}
{{- end -}}

{{/* Containers from values, each securityContext merged over the chart's. (dict "root" $ "containers" list) */}}
{{- define "workauto.extraContainers" -}}
{{- $out := list -}}
{{- range .containers -}}
{{- $c := deepCopy . -}}
{{- $_ := set $c "securityContext" (mergeOverwrite (deepCopy $.root.Values.containerSecurityContext) ($c.securityContext | default dict)) -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The pod's volumes: /tmp, Kafka's (services), the workload's extraVolumes. (dict "root" $ "cfg" $cfg "kafka" bool) */}}
{{- define "workauto.volumes" -}}
- name: tmp
  emptyDir: { sizeLimit: 64Mi }
{{- if .kafka }}
{{- include "workauto.kafkaVolumes" .root }}
{{- end }}
{{- with .cfg.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "workauto.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .kafka }}
{{- include "workauto.kafkaVolumeMounts" .root }}
{{- end }}
{{- with .cfg.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "workauto.containerCommon" -}}
image: {{ include "workauto.image" .root }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
securityContext: {{- toYaml .root.Values.containerSecurityContext | nindent 2 }}
lifecycle:
  preStop:
    sleep: { seconds: {{ .cfg.preStopSleepSeconds }} }
resources: {{- toYaml .cfg.resources | nindent 2 }}
{{- with .cfg.extraEnvFrom }}
envFrom: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "workauto.metricsContainerPort" -}}
{{- if .Values.metrics.enabled -}}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
{{- end -}}
{{- end -}}

{{/* On the Services that carry the metrics port: the ServiceMonitor selects these only. */}}
{{- define "workauto.metricsServiceLabel" -}}
{{- if .Values.metrics.enabled }}workauto.io/metrics: "true"{{ end }}
{{- end -}}

{{- define "workauto.metricsServicePort" -}}
{{- if .Values.metrics.enabled -}}
- name: metrics
  port: {{ .Values.metrics.port }}
  targetPort: metrics
{{- end -}}
{{- end -}}

{{/* One egress rule from networkPolicy.dns/postgresql/kafka/collector: its ports (DNS: 53, UDP and TCP), to its peers (none: anywhere). */}}
{{- define "workauto.egressRule" -}}
- ports: [{{ if .ports }}{{ range $i, $p := .ports }}{{ if $i }}, {{ end }}{ port: {{ $p }}, protocol: TCP }{{ end }}{{ else }}{ port: 53, protocol: UDP }, { port: 53, protocol: TCP }{{ end }}]
  {{- with .to }}
  to: {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/*
PromQL label matchers of this release's series, as the chart's ServiceMonitor scrapes them (job is
the scraped Service's name, <fullname>-<component>), and of kube-state-metrics' series about its
Deployments and pods. Used by the Grafana dashboard and the PrometheusRule.
*/}}
{{- define "workauto.promSelector" -}}
namespace="{{ .Release.Namespace }}", job=~"{{ include "workauto.fullname" . }}-.+"
{{- end -}}
{{- define "workauto.ksmDeploymentSelector" -}}
namespace="{{ .Release.Namespace }}", deployment=~"{{ include "workauto.fullname" . }}-.+"
{{- end -}}
{{- define "workauto.ksmPodSelector" -}}
namespace="{{ .Release.Namespace }}", pod=~"{{ include "workauto.fullname" . }}-.+"
{{- end -}}
