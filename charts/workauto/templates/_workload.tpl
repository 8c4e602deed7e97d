{{/*
What a workload (the gateway or a service) is made of, shared by its Deployment and, with
migrations.mode=job, its migration Job.
*/}}

{{/* Keys of a service's entry that are not per-workload settings. */}}
{{- define "workauto.serviceKeys" -}}enabled grpcPort addrEnv databaseSecretKey database serviceAccount secretEnv optionalSecretEnv calls publicEgress extraEgress keda{{- end -}}
{{- define "workauto.gatewayKeys" -}}port authCacheTtlMs rateLimitPerMinute tenantRateLimitPerMinute tenantConcurrency downstreamDeadlineMs keepAliveTimeoutMs trustedProxies publicBaseUrl service ingress httpRoute database serviceAccount{{- end -}}

{{/* (dict "root" $ "component" "gateway"|service name): the context every workload helper takes, as YAML. */}}
{{- define "workauto.workloadContext" -}}
{{- $own := deepCopy (eq .component "gateway" | ternary .root.Values.gateway (get .root.Values.services .component)) -}}
{{- range splitList " " (include (eq .component "gateway" | ternary "workauto.gatewayKeys" "workauto.serviceKeys") .) -}}
{{- $_ := unset $own . -}}
{{- end -}}
{{- $cfg := include "workauto.settings" (dict "root" .root "own" $own) | fromYaml -}}
{{- $whole := eq .component "gateway" | ternary .root.Values.gateway (get .root.Values.services .component) -}}
{{- toYaml (dict "cfg" $cfg "kafka" (ne .component "gateway") "database" ($whole.database | default dict) "keda" ($whole.keda | default dict)) -}}
{{- end -}}

{{/*
DATABASE_URL: the key `database.key` (default `uri`, as CloudNativePG's `<cluster>-app` Secret holds
it) of `database.existingSecret` when the workload names one, else `<name>-database-url` of the
release's Secret. (dict "root" $ "component" name "database" dict)
*/}}
{{- define "workauto.databaseUrlEnv" -}}
- name: DATABASE_URL
{{- with .database.existingSecret }}
  valueFrom: { secretKeyRef: { name: {{ . }}, key: {{ $.database.key | default "uri" }} } }
{{- else }}
  {{- $svc := get .root.Values.services .component | default dict }}
  {{- include "workauto.secretRef" (dict "root" .root "key" ($svc.databaseSecretKey | default (printf "%s-database-url" .component))) | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A migration Job's variables: only what `main.js migrate` reads (DATABASE_URL, LOG_LEVEL and the
lock's timeout), and the workload's plain NODE_* settings (an extra CA, heap size). No other Secret.
(dict "root" $ "component" name "cfg" $cfg "database" dict)
*/}}
{{- define "workauto.migrateEnv" -}}
- name: LOG_LEVEL
  value: {{ .root.Values.logLevel | quote }}
{{ include "workauto.databaseUrlEnv" . }}
{{- $env := .cfg.env | default dict }}
{{- range $name := list "MIGRATION_LOCK_TIMEOUT_MS" "NODE_OPTIONS" "NODE_EXTRA_CA_CERTS" }}
{{- with get $env $name }}
- name: {{ $name }}
  value: {{ . | toString | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Every variable a workload's container gets. (dict "root" $ "component" name "cfg" $cfg "job" bool) */}}
{{- define "workauto.env" -}}
{{- $root := .root -}}
{{- include "workauto.commonEnv" . }}
{{- if eq .component "gateway" }}
{{- with $root.Values.gateway }}
- name: PORT
  value: {{ .port | quote }}
# Idempotency-Key records (their stored responses are encrypted) and the shared rate-limit counters.
{{ include "workauto.databaseUrlEnv" $ }}
- name: ENCRYPTION_KEYS
  {{- include "workauto.secretRef" (dict "root" $root "key" "encryption-keys") | nindent 2 }}
- name: CALLER_SIGNING_KEY
  {{- include "workauto.secretRef" (dict "root" $root "key" "caller-signing-key") | nindent 2 }}
- name: AUTH_CACHE_TTL_MS
  value: {{ .authCacheTtlMs | quote }}
- name: RATE_LIMIT_PER_MINUTE
  value: {{ .rateLimitPerMinute | quote }}
{{- if .tenantRateLimitPerMinute }}
- name: RATE_LIMIT_PER_TENANT_PER_MINUTE
  value: {{ .tenantRateLimitPerMinute | quote }}
{{- end }}
- name: GATEWAY_TENANT_CONCURRENCY
  value: {{ .tenantConcurrency | quote }}
- name: DOWNSTREAM_DEADLINE_MS
  value: {{ .downstreamDeadlineMs | quote }}
- name: HTTP_KEEP_ALIVE_TIMEOUT_MS
  value: {{ .keepAliveTimeoutMs | quote }}
{{- with .trustedProxies }}
- name: TRUSTED_PROXIES
  value: {{ . | quote }}
{{- end }}
{{- with .publicBaseUrl }}
- name: PUBLIC_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- range $name, $svc := $root.Values.services }}
{{- if ne $svc.enabled false }}
- name: {{ $svc.addrEnv }}
  value: "{{ include "workauto.componentName" (dict "root" $root "component" $name) }}:{{ $svc.grpcPort }}"
{{- end }}
{{- end }}
{{- else }}
{{- $name := .component }}
{{- $svc := get $root.Values.services $name }}
{{- include "workauto.kafkaEnv" (dict "root" $root "job" .job) }}
- name: GRPC_PORT
  value: {{ $svc.grpcPort | quote }}
- name: GRPC_REFLECTION
  value: {{ $root.Values.grpcReflection | quote }}
{{ include "workauto.databaseUrlEnv" $ }}
- name: CALLER_VERIFY_KEYS
  {{- include "workauto.secretRef" (dict "root" $root "key" "caller-verify-keys") | nindent 2 }}
{{- range $env, $key := $svc.secretEnv }}
- name: {{ $env }}
  {{- include "workauto.secretRef" (dict "root" $root "key" $key) | nindent 2 }}
{{- end }}
{{- range $env, $key := $svc.optionalSecretEnv }}
- name: {{ $env }}
  {{- include "workauto.secretRef" (dict "root" $root "key" $key "optional" true) | nindent 2 }}
{{- end }}
{{- range $callee := $svc.calls }}
{{- $target := required (printf "services.%s.calls names %s, which is not a service" $name $callee) (get $root.Values.services $callee) }}
{{- /* A disabled callee gets no address: the caller runs without it (agents: no app tools). */}}
{{- if ne $target.enabled false }}
- name: {{ $target.addrEnv }}
  value: "{{ include "workauto.componentName" (dict "root" $root "component" $callee) }}:{{ $target.grpcPort }}"
{{- end }}
{{- end }}
{{- end }}
{{- if and (eq .root.Values.migrations.mode "job") (not .job) }}
# A pre-install/pre-upgrade Job migrates; the process waits, not ready, until its database has them all.
- name: MIGRATE_ON_START
  value: "false"
{{- end }}
{{- include "workauto.workloadEnv" . }}
{{- end -}}
