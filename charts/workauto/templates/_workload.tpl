{{/*
What a workload (the gateway or a service) is made of, shared by its Deployment and, with
migrations.mode=job, its migration Job.
*/}}

{{/* Keys of a service's entry that are not per-workload settings. */}}
{{- define "workauto.serviceKeys" -}}enabled grpcPort addrEnv databaseSecretKey secretEnv optionalSecretEnv calls publicEgress extraEgress{{- end -}}
{{- define "workauto.gatewayKeys" -}}port authCacheTtlMs rateLimitPerMinute tenantRateLimitPerMinute tenantConcurrency tenantStreams tenantEventStreams streamIdleTimeoutMs downstreamDeadlineMs trustedProxies publicBaseUrl service ingress{{- end -}}

{{/* (dict "root" $ "component" "gateway"|service name): the context every workload helper takes, as YAML. */}}
{{- define "workauto.workloadContext" -}}
{{- $own := deepCopy (eq .component "gateway" | ternary .root.Values.gateway (get .root.Values.services .component)) -}}
{{- range splitList " " (include (eq .component "gateway" | ternary "workauto.gatewayKeys" "workauto.serviceKeys") .) -}}
{{- $_ := unset $own . -}}
{{- end -}}
{{- $cfg := include "workauto.settings" (dict "root" .root "own" $own) | fromYaml -}}
{{- toYaml (dict "cfg" $cfg "kafka" (ne .component "gateway")) -}}
{{- end -}}

{{/* Every variable a workload's container gets. (dict "root" $ "component" name "cfg" $cfg "job" bool) */}}
{{- define "workauto.env" -}}
{{- $root := .root -}}
{{- include "workauto.commonEnv" . }}
{{- if eq .component "gateway" }}
{{- with $root.Values.gateway }}
- name: PORT
  value: {{ .port | quote }}
# Idempotency-Key records (their stored responses are encrypted).
- name: DATABASE_URL
  {{- include "workauto.secretRef" (dict "root" $root "key" "gateway-database-url") | nindent 2 }}
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
- name: GATEWAY_TENANT_STREAMS
  value: {{ .tenantStreams | quote }}
- name: GATEWAY_TENANT_EVENT_STREAMS
  value: {{ .tenantEventStreams | quote }}
- name: STREAM_IDLE_TIMEOUT_MS
  value: {{ .streamIdleTimeoutMs | quote }}
- name: DOWNSTREAM_DEADLINE_MS
  value: {{ .downstreamDeadlineMs | quote }}
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
- name: DATABASE_URL
  {{- include "workauto.secretRef" (dict "root" $root "key" ($svc.databaseSecretKey | default (printf "%s-database-url" $name))) | nindent 2 }}
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
