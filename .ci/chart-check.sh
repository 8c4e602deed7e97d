#!/usr/bin/env bash
# Checks the Helm chart offline, as a platform team would before installing it (make chart-check,
# part of make test). Fails on any finding:
#   - helm lint --strict;
#   - renders (default values, production-like values, a chart-made Secret, a 53-character release
#     name) validated object by object with kubeconform against the Kubernetes JSON schemas shipped
#     by the PyPI package kubernetes-validate (strict: unknown fields are errors);
#   - the "restricted" Pod Security level on every pod template, with the admission controller's own
#     code (.ci/pod-security, k8s.io/pod-security-admission);
#   - every object name a valid DNS label (checks.py);
#   - values.schema.json refuses each bad value listed below at render time;
#   - the chart README's values table is what helm-docs makes of values.yaml (--readme rewrites it).
# Tools are built or downloaded once from the Go module proxy and PyPI into .cache/chart-check.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cache="$root/.cache/chart-check"
bin="$cache/bin"
K8S_VERSION=1.33.0
KUBECONFORM_VERSION=v0.7.0
KUBERNETES_VALIDATE_VERSION=1.37.0
HELM_DOCS_VERSION=v1.14.2
PROMQL_PARSER_VERSION=0.11.0   # PyPI promql-parser: a PromQL parser (Rust, with type checks) for the alerts and the dashboard
chart=charts/workauto
helm() { scripts/helm.sh "$@"; }
log() { echo "chart-check: $*"; }
mkdir -p "$bin"

# --- tools ---------------------------------------------------------------------------------------
if [ ! -x "$bin/kubeconform" ]; then
  log "building kubeconform $KUBECONFORM_VERSION (once)…"
  GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
fi
if [ ! -x "$bin/helm-docs" ]; then
  log "building helm-docs $HELM_DOCS_VERSION (once)…"
  GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/norwoodj/helm-docs/cmd/helm-docs@$HELM_DOCS_VERSION"
fi
# The chart's README (its values table) from values.yaml's `# --` comments and README.md.gotmpl.
helm_docs() { "$bin/helm-docs" --chart-search-root charts --chart-to-generate "$chart" --skip-version-footer --log-level warning "$@"; }
if [ "${1:-}" = "--readme" ]; then
  helm_docs
  log "wrote $chart/README.md"
  exit 0
fi
if [ ! -x "$bin/pod-security" ] || [ -n "$(find .ci/pod-security -newer "$bin/pod-security" -type f)" ]; then
  log "building the Pod Security evaluator (k8s.io/pod-security-admission; once)…"
  (cd .ci/pod-security && go build -o "$bin/pod-security" .)
fi
schemas="$cache/schemas/v$K8S_VERSION-standalone-strict"
if [ ! -f "$schemas/deployment-apps-v1.json" ]; then
  log "fetching the Kubernetes $K8S_VERSION schemas (PyPI kubernetes-validate $KUBERNETES_VALIDATE_VERSION; once)…"
  rm -rf "$cache/wheel" "$schemas"
  python3 -m pip download --quiet --no-deps --dest "$cache/wheel" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  # The package's schemas refer to their shared definitions as https://kubernetes.io/api/_definitions.json
  # (their $id); kubeconform reads them from files, so the references are made relative to the folder.
  python3 - "$cache/wheel" "$schemas" "$K8S_VERSION" <<'PY'
import glob, json, os, sys, zipfile
wheel_dir, out, version = sys.argv[1:]
prefix = f"kubernetes_validate/kubernetes-json-schema/v{version}-local-strict/"
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(glob.glob(os.path.join(wheel_dir, "*.whl"))[0]) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and n.endswith(".json")]
    if not names:
        sys.exit(f"kubernetes-validate has no schemas for Kubernetes {version}")
    for n in names:
        schema = json.loads(z.read(n).decode().replace('"/api/_definitions.json#', '"_definitions.json#'))
        schema.pop("$id", None)  # resolve against the file, not the kubernetes.io address
        with open(os.path.join(out, n[len(prefix):]), "w") as f:
            json.dump(schema, f)
PY
fi

if [ ! -f "$cache/python/promql_parser-$PROMQL_PARSER_VERSION.installed" ]; then
  log "installing promql-parser $PROMQL_PARSER_VERSION from PyPI (once)…"
  rm -rf "$cache/python"
  python3 -m pip install --quiet --target "$cache/python" "promql-parser==$PROMQL_PARSER_VERSION"
  touch "$cache/python/promql_parser-$PROMQL_PARSER_VERSION.installed"
fi

# --- renders -------------------------------------------------------------------------------------
# A folder per run: two runs side by side (two checkouts' make test) never read each other's renders.
renders="$(mktemp -d "${TMPDIR:-/tmp}/chart-check.XXXXXX")"
trap 'rm -rf "$renders"' EXIT
printf '{"kty":"OKP","crv":"Ed25519","kid":"test"}' > "$renders/jwk.json"; printf '{"keys":[]}' > "$renders/jwks.json"; printf '{}' > "$renders/oauth.json"
base=(--kube-version "$K8S_VERSION" --set kafka.brokers=kafka:9092 --set secrets.existingSecret=workauto)
made_secret=(--kube-version "$K8S_VERSION" --set kafka.brokers=kafka:9092
  --set secrets.platformAdminToken=0123456789abcdef0123456789abcdef --set secrets.encryptionKeys=k1:AAAA
  --set-file secrets.callerSigningKey="$renders/jwk.json" --set-file secrets.callerVerifyKeys="$renders/jwks.json"
  --set-file secrets.agentsCallerSigningKey="$renders/jwk.json" --set-file secrets.oauthProviders="$renders/oauth.json" --set secrets.databaseUrls.gateway=postgres://db/gateway)
for s in identity notes-tasks crm-pipelines calendar webhooks apps agents; do made_secret+=(--set "secrets.databaseUrls.$s=postgres://db/$s"); done
# SASL with the username as a value and the password from a Secret (checks.py: check_plain_username).
made_secret+=(--set kafka.sasl.mechanism=scram-sha-512 --set kafka.sasl.username=workauto --set kafka.sasl.existingSecret=kafka-password)

log "helm lint --strict"
helm lint --strict "${base[@]}" "$chart"
helm lint --strict --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml "$chart"
helm lint --strict --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml -f .ci/chart/cloud-sql-values.yaml "$chart"

# Renders run side by side (helm is single-threaded); a failed one fails the check.
pids=()
render() { local name="$1" release="$2"; shift 2; helm template "$release" "$chart" "$@" > "$renders/$name.yaml" & pids+=($!); }
render default workauto "${base[@]}"
render production workauto --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml
render made-secret workauto "${made_secret[@]}"
long=platform-team-production-eu-west-1-blue-green-0000001   # 53 characters (Helm's maximum), fullname 62
render long-name "$long" "${base[@]}"
# One workload's own settings over production's defaults (checks.py: the defaults it does not name stay).
render overrides workauto --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml \
  --set services.agents.resources.limits.memory=1Gi --set services.agents.autoscaling.maxReplicas=20 \
  --set services.agents.pdb.maxUnavailable=2 --set defaults.env.NODE_OPTIONS=--max-old-space-size=384
render cloud-sql workauto --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml \
  -f .ci/chart/cloud-sql-values.yaml
render kafka-mtls workauto --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml \
  -f .ci/chart/kafka-mtls-values.yaml
render migrations-job workauto --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml \
  -f .ci/chart/cloud-sql-values.yaml --set migrations.mode=job
# Valid values a platform may well use (checks.py: check_edge).
render edge workauto "${base[@]}" --set gateway.service.type=LoadBalancer --set metrics.serviceMonitor.enabled=true \
  --set gateway.ingress.enabled=true --set services.apps.enabled=false
# What platform teams add over production (checks.py: check_platform); chart-install installs it too.
render platform workauto --kube-version "$K8S_VERSION" -f .ci/chart/production-values.yaml -f .ci/chart/platform-values.yaml

for pid in "${pids[@]}"; do wait "$pid"; done

failed=0
# One kubeconform run over every render: it loads each schema once.
log "kubeconform ($(cd "$renders" && echo *.yaml))"
"$bin/kubeconform" -strict -summary -skip ServiceMonitor,PrometheusRule,KafkaTopic,KafkaUser,HTTPRoute,ScaledObject -kubernetes-version "$K8S_VERSION" \
  -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$renders"/*.yaml || failed=1
for r in "$renders"/*.yaml; do
  log "pod security, restricted ($(basename "$r" .yaml))"
  "$bin/pod-security" < "$r" || failed=1
done

# --- what the issue asks of the rendered objects ---------------------------------------------------
log "rendered objects (.ci/chart/checks.py)"
PYTHONPATH="$cache/python" python3 .ci/chart/checks.py "$renders" || failed=1

log "chart README current (helm-docs)"
if ! diff -u "$chart/README.md" <(helm_docs --dry-run) > "$renders/readme.diff"; then
  echo "chart-check: FAIL: $chart/README.md differs from values.yaml; run .ci/chart-check.sh --readme and commit it:"
  head -40 "$renders/readme.diff"; failed=1
fi

# --- values the schema (or the templates) must refuse ----------------------------------------------
# Each refusal is one helm run; they run four at a time, each writing its verdict to a file.
refuse() {
  local why="$1"; shift
  local out verdict="$renders/refused.$((++refusals))"
  (
    if out=$(helm template workauto "$chart" "${base[@]}" "$@" 2>&1); then
      echo "chart-check: FAIL: rendered although $why ($*)"
    elif ! grep -q "$why" <<<"$out"; then
      echo "chart-check: FAIL: refused, but without naming '$why' ($*):"; echo "$out" | head -5
    fi
  ) > "$verdict" &
  if [ $((refusals % 4)) = 0 ]; then wait; fi
}
refusals=0
log "values the chart refuses"
refuse "logLevel" --set logLevel=verbose
refuse "defaults.replicas" --set defaults.replicas=0
refuse "Additional property replica is not allowed" --set gateway.replica=3
refuse "Additional property kafkaBrokers is not allowed" --set kafkaBrokers=kafka:9092
refuse "kafka.brokers" --set kafka.brokers=kafka
refuse "kafka.sasl.mechanism" --set kafka.sasl.mechanism=gssapi
refuse "kafka.topicReplicationFactor" --set kafka.topicReplicationFactor=0
refuse "image.digest" --set image.digest=latest
refuse "gateway.port" --set gateway.port=70000
refuse "gateway.publicBaseUrl" --set gateway.publicBaseUrl=https://api.example.com/api/v1
refuse "metrics.serviceMonitor.interval" --set metrics.serviceMonitor.interval=often
refuse "services.identity.grpcPort" --set services.identity.grpcPort=abc
refuse "services.billing" --set services.billing.grpcPort=50060
refuse "secrets.platformAdminToken" --set secrets.platformAdminToken=short
refuse "kafka.sasl.existingSecret is required" --set kafka.sasl.mechanism=scram-sha-256
refuse "kafka.brokers is required" --set kafka.brokers=
refuse "the Secret key [a-z-]* is required" --set secrets.existingSecret=
# A PodDisruptionBudget that allows no disruption blocks every node drain.
refuse "defaults.pdb.maxUnavailable" --set-string defaults.pdb.maxUnavailable=0
refuse "services.agents.pdb.maxUnavailable" --set-string services.agents.pdb.maxUnavailable=0%
refuse "pdb.minAvailable 2 leaves no pod of [a-z-]* to evict" --set defaults.pdb.minAvailable=2
refuse "pdb.minAvailable 3 leaves no pod of identity to evict" --set defaults.autoscaling.enabled=true --set defaults.autoscaling.minReplicas=3 --set services.identity.pdb.minAvailable=3
refuse "pdb.minAvailable" --set-string defaults.pdb.minAvailable=100%
refuse "image is required" --set 'services.agents.extraContainers[0].name=proxy'
refuse "mountPath is required" --set 'defaults.extraVolumeMounts[0].name=ca'
refuse "databasePoolMax" --set gateway.databasePoolMax=0
refuse "migrations.mode=job needs secrets.existingSecret" --set secrets.existingSecret= --set migrations.mode=job
refuse "migrations.mode" --set migrations.mode=manual
refuse "kafka.strimzi.cluster is required" --set kafka.strimzi.topics.enabled=true
refuse "kafka.strimzi.user makes the Kafka credentials" --set kafka.strimzi.cluster=events --set kafka.strimzi.user.enabled=true --set kafka.sasl.mechanism=plain --set kafka.sasl.existingSecret=kafka
refuse "kafka.strimzi.user.authentication=tls needs kafka.tls.enabled" --set kafka.strimzi.cluster=events --set kafka.strimzi.user.enabled=true --set kafka.strimzi.user.authentication=tls
refuse "kafka.strimzi.user.authentication" --set kafka.strimzi.user.authentication=scram-sha-256
refuse "kafka.tls.clientSecret needs kafka.tls.enabled" --set kafka.tls.clientSecret=kafka-client
# Values the services would refuse at start (their parsers' rules; libs/service chart-env.test.ts holds
# the schema to them): a duration without a unit, a number of milliseconds as a duration, a bad URL.
refuse "APPS_PROBE_INTERVAL" --set services.apps.env.APPS_PROBE_INTERVAL=300
refuse "WEBHOOK_DISABLE_AFTER" --set services.webhooks.env.WEBHOOK_DISABLE_AFTER=5days
refuse "WEBHOOK_SECRET_GRACE" --set services.webhooks.env.WEBHOOK_SECRET_GRACE=86400000
refuse "OPENAI_BASE_URL" --set services.agents.env.OPENAI_BASE_URL=api.openai.com
refuse "STARTUP_TIMEOUT_MS" --set-string defaults.env.STARTUP_TIMEOUT_MS=5m
refuse "probes.startup: periodSeconds × failureThreshold (30 s) must exceed" --set probes.startup.failureThreshold=6
refuse "kafka.strimzi.apiVersion" --set kafka.strimzi.apiVersion=kafka.strimzi.io/v1beta1
refuse "defaults.topologySpread.zones" --set defaults.topologySpread.zones=Never
refuse "gateway.httpRoute.parentRefs is required" --set gateway.httpRoute.enabled=true
refuse "services.webhooks.keda.serverAddress is required" --set services.webhooks.keda.enabled=true
refuse "loadBalancerSourceRanges needs gateway.service.type LoadBalancer" --set 'gateway.service.loadBalancerSourceRanges[0]=10.0.0.0/8'
wait
if grep -q . "$renders"/refused.*; then cat "$renders"/refused.*; failed=1; fi

if [ "$failed" != 0 ]; then echo "chart-check: FAILED"; exit 1; fi
log "all checks passed"
