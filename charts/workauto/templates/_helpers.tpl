{{- define "workauto.fullname" -}}{{ .Release.Name }}-workauto{{- end -}}
{{- define "workauto.secretName" -}}{{ .Values.secrets.existingSecret | default (printf "%s-secrets" (include "workauto.fullname" .)) }}{{- end -}}
{{- define "workauto.labels" -}}
app.kubernetes.io/name: workauto
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "workauto.commonEnv" -}}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: DATABASE_STATEMENT_TIMEOUT_MS
  value: {{ .Values.databaseStatementTimeoutMs | quote }}
- name: KAFKA_BROKERS
  value: {{ required "kafka.brokers is required" .Values.kafka.brokers | quote }}
- name: KAFKA_TOPIC_PARTITIONS
  value: {{ .Values.kafka.topicPartitions | quote }}
- name: KAFKA_TOPIC_REPLICATION_FACTOR
  value: {{ .Values.kafka.topicReplicationFactor | quote }}
- name: KAFKA_TOPIC_RETENTION_MS
  value: {{ .Values.kafka.topicRetentionMs | quote }}
{{- if .Values.otelEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otelEndpoint | quote }}
{{- end }}
{{- end -}}
