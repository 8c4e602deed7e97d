#!/usr/bin/env bash
# Installs the chart on a real Kubernetes API server (make chart-install, part of make test after the
# offline checks of .ci/chart-check.sh). etcd and kube-apiserver (and a kubectl of the same version)
# are built once from the Go module proxy into .cache/kube (.ci/kube/*/go.mod pin the versions) and
# run on 127.0.0.1 for the length of the check. There is no kubelet, scheduler or controller-manager:
# no pod ever runs, and nothing waits for readiness. What the API server must accept or refuse:
#   - each release of .ci/releases installed, upgraded to the working tree's chart with
#     .ci/chart/production-values.yaml and platform-values.yaml, and uninstalled (the last one also
#     upgraded again unchanged; the upgrade from it takes its v1beta2 resources to v1), every object
#     going through the server's validation, admission and the CRDs' schemas (ServiceMonitor and
#     PrometheusRule: prometheus-operator's; HTTPRoute: Gateway API's; ScaledObject: KEDA's;
#     KafkaTopic and KafkaUser: Strimzi 0.51.0's, which serve v1beta2 and v1), in a namespace that
#     enforces the "restricted" Pod Security level and has a ResourceQuota on cpu, memory and
#     ephemeral storage; a warning from the server fails too;
#   - the chart's kafka.strimzi.apiVersion=kafka.strimzi.io/v1beta2 resources created with a
#     server-side dry run on Strimzi 0.51.0's CRDs;
#   - then, on Strimzi 1.2.0's CRDs (v1 only, as Strimzi 1.x installs them; .ci/strimzi-crds.sh makes
#     both from Strimzi's own model classes), the chart's v1 KafkaTopics and KafkaUser accepted and
#     its v1beta2 ones refused (server-side dry runs: proof the CRDs are Strimzi 1.x's);
#   - the pod of every Deployment's template and the `helm test` hook's objects created with a
#     server-side dry run, so PodSecurity, ServiceAccount, Priority and ResourceQuota admission judge
#     each pod as they would when a ReplicaSet creates it, and two broken pods refused (proof that
#     the check can fail);
#   - after uninstall, nothing labelled with the release is left but what is annotated
#     helm.sh/resource-policy: keep.
# `helm test` itself is not run (its pod would never start): its objects are dry-run created instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cache="$root/.cache/kube"
PROMETHEUS_OPERATOR_VERSION=v0.85.0   # the CRDs of ServiceMonitor and PrometheusRule
GATEWAY_API_VERSION=v1.3.0            # HTTPRoute (sigs.k8s.io/gateway-api, standard channel)
KEDA_VERSION=v2.17.2                  # ScaledObject
STRIMZI_OLD=0.51.0 STRIMZI_NEW=1.2.0  # KafkaTopic and KafkaUser (.ci/strimzi-crds.sh)
# As docs/operations.md installs it. A chart 0.1 release named without "workauto" cannot be upgraded
# in place (docs/operations.md says why and what to do).
release=workauto
ns=workauto
chart=charts/workauto
log() { echo "chart-install: $*"; }
fail() { echo "chart-install: FAIL: $*" >&2; exit 1; }
started=$(date +%s%N)
mark=$started
took() { local now; now=$(date +%s%N); log "$1 ($(( (now - mark) / 1000000 )) ms)"; mark=$now; }

for tool in go python3 openssl curl git flock; do
  command -v "$tool" >/dev/null || fail "$tool is needed (Go ≥ 1.24 from go.dev, the others from your distribution's packages)"
done

# --- binaries, built once per pinned version ------------------------------------------------------
# One folder per content of the module's folder (go.mod, go.sum), so checkouts pinning other versions
# (all share .cache) never rebuild each other's; a lock keeps two checkouts from building one twice.
version_of() { awk -v m="$1" '{ for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$2"; }
build() { # build <module dir> <output dir> <go build args…>
  local dir="$1" out="$2"; shift 2
  [ -f "$out/.complete" ] && return 0
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock -n 9 || { log "another checkout is building into .cache/kube; waiting for it…"; flock 9; }
  if [ ! -f "$out/.complete" ]; then
    log "building $(basename "$out") from the Go module proxy (once; Kubernetes takes 10 minutes or more on 2 cores)…"
    rm -rf "$out.tmp"
    # Static binaries, as Kubernetes and etcd release them; no VCS stamp (this repository's state is not theirs).
    (cd "$dir" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -o "$out.tmp/" "$@") ||
      fail "building $(basename "$out") failed (above); check that the Go module proxy is reachable (go env GOPROXY)"
    touch "$out.tmp/.complete"
    rm -rf "$out" && mv "$out.tmp" "$out"
    took "built $(basename "$out")"
  fi
  exec 9>&-
}
stamp() { cat "$1"/* | sha256sum | cut -c1-10; }
K8S_VERSION=$(version_of k8s.io/kubernetes .ci/kube/apiserver/go.mod)
ETCD_VERSION=$(version_of go.etcd.io/etcd/server/v3 .ci/kube/etcd/go.mod)
kube_bin="$cache/kubernetes-$K8S_VERSION-$(stamp .ci/kube/apiserver)"
etcd_bin="$cache/etcd-$ETCD_VERSION-$(stamp .ci/kube/etcd)"
# What /version reports (helm checks the chart's kubeVersion against it); a module build leaves it unset.
v=k8s.io/component-base/version minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
build .ci/kube/apiserver "$kube_bin" -ldflags "-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
build .ci/kube/etcd "$etcd_bin" -ldflags "-s -w" .
crds="$cache/crds-prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
if [ ! -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ]; then
  log "fetching prometheus-operator $PROMETHEUS_OPERATOR_VERSION's CRDs from the Go module proxy (once)…"
  dir=$(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || fail "go mod download of prometheus-operator failed (above); check that the Go module proxy is reachable (go env GOPROXY)"
  mkdir -p "$crds.tmp"
  cp "$dir"/example/prometheus-operator-crd/monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml "$crds.tmp/"
  rm -rf "$crds" && mv "$crds.tmp" "$crds"
fi
# More CRDs from their Go modules' trees (each fetched once): <module@version> <folder> <files…>.
module_crds() {
  local module="$1" folder="$2"; shift 2
  local out="$cache/crds-$(basename "${module%@*}")-${module#*@}"
  if [ ! -f "$out/.complete" ]; then
    log "fetching $module's CRDs from the Go module proxy (once)…" >&2
    local dir
    dir=$(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod go mod download -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') ||
      fail "go mod download of $module failed (above); check that the Go module proxy is reachable (go env GOPROXY)"
    rm -rf "$out" && mkdir -p "$out"
    for f in "$@"; do cp "$dir/$folder/$f" "$out/"; done
    touch "$out/.complete"
  fi
  echo "$out"
}
gateway_api_crds=$(module_crds "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" config/crd/standard gateway.networking.k8s.io_httproutes.yaml)
keda_crds=$(module_crds "github.com/kedacore/keda/v2@$KEDA_VERSION" config/crd/bases keda.sh_scaledobjects.yaml)
strimzi_old="$cache/strimzi-crds-$STRIMZI_OLD" strimzi_new="$cache/strimzi-crds-$STRIMZI_NEW"
.ci/strimzi-crds.sh "$STRIMZI_OLD" "$strimzi_old"
.ci/strimzi-crds.sh "$STRIMZI_NEW" "$strimzi_new"
# Its discovery cache in the run's folder: dropped when the Strimzi CRDs change their versions below.
kubectl() { "$kube_bin/kubectl" --cache-dir "$tmp/kubectl-cache" "$@"; }
helm() { scripts/helm.sh "$@"; }
helm version >/dev/null   # builds helm now if needed, so the server's timings below are its own
took "binaries: kube-apiserver and kubectl $K8S_VERSION, etcd $ETCD_VERSION"

# --- etcd and kube-apiserver on loopback ------------------------------------------------------------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/chart-install.XXXXXX")"
pids=()
stop() {
  local from; from=$(date +%s%N)
  # kube-apiserver can spend 20 s draining its own watches; nothing it holds is kept, so it gets 1 s.
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    (trap 'kill $sleeper 2>/dev/null; exit' TERM; sleep 1 & sleeper=$!; wait $sleeper; kill -9 "${pids[@]}" 2>/dev/null) &
    local killer=$!
    wait "${pids[@]}" 2>/dev/null || true
    kill "$killer" 2>/dev/null || true; wait "$killer" 2>/dev/null || true
  fi
  rm -rf "$tmp"
  local now; now=$(date +%s%N)
  # To the script's own stdout: a signal's trap runs inside whatever redirection was active.
  log "stopped etcd and kube-apiserver ($(( (now - from) / 1000000 )) ms); $(( (now - started) / 1000000 )) ms in all" >&8
}
exec 8>&1
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Free ports, below the range the kernel hands out to outgoing connections: a port freed again here
# could otherwise be taken by any client's connection (another checkout's kube-apiserver talking to
# its etcd) before etcd binds it. Two checkouts running make test at once each get their own.
read -r etcd_port peer_port api_port < <(python3 -c '
import random, socket
try: low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except OSError: low = 32768
ports = []
while len(ports) < 3:
    p = random.randrange(10000, low)
    with socket.socket() as s:
        try: s.bind(("127.0.0.1", p))
        except OSError: continue
    if p not in ports: ports.append(p)
print(*ports)')

"$etcd_bin/etcd" --name ci --data-dir "$tmp/etcd" --unsafe-no-fsync --log-level warn \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "ci=http://127.0.0.1:$peer_port" > "$tmp/etcd.log" 2>&1 &
pids+=($!)

mkdir -p "$tmp/pki"
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/pki/sa.key" 2>/dev/null
token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
echo "$token,admin,admin,system:masters" > "$tmp/pki/tokens.csv"
# The admission plugins a cluster runs on pods (most are on by default; named so a change of
# defaults does not drop one silently).
"$kube_bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" --cert-dir "$tmp/pki" \
  --token-auth-file "$tmp/pki/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$tmp/pki/sa.key" \
  --service-account-signing-key-file "$tmp/pki/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,Priority,DefaultIngressClass,ResourceQuota \
  > "$tmp/kube-apiserver.log" 2>&1 &
pids+=($!)

export KUBECONFIG="$tmp/kubeconfig" HELM_CACHE_HOME="$tmp/helm/cache" HELM_CONFIG_HOME="$tmp/helm/config" HELM_DATA_HOME="$tmp/helm/data"
ready=
for _ in $(seq 1 240); do
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$tmp"/*.log; fail "etcd or kube-apiserver exited (its log above); a port taken in between? run again"; }
  done
  if [ -f "$tmp/pki/apiserver.crt" ] &&
    curl -sf --cacert "$tmp/pki/apiserver.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$api_port/readyz" >/dev/null; then
    ready=1; break
  fi
  sleep 0.25
done
[ -n "$ready" ] || { tail -n 20 "$tmp/kube-apiserver.log"; fail "kube-apiserver was not ready within 60 s (/readyz; its log above): an overloaded machine? run again"; }
# The self-signed certificate kube-apiserver made in --cert-dir comes with the CA that signed it.
cat > "$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: ci, cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$tmp/pki/apiserver.crt"}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: ci, context: {cluster: ci, user: admin, namespace: $ns}}]
current-context: ci
EOF
took "kube-apiserver ready on 127.0.0.1:$api_port (etcd on :$etcd_port)"

# --- what a platform team provides before installing ------------------------------------------------
crd_files=(-f "$crds/monitoring.coreos.com_servicemonitors.yaml" -f "$crds/monitoring.coreos.com_prometheusrules.yaml"
  -f "$gateway_api_crds/gateway.networking.k8s.io_httproutes.yaml" -f "$keda_crds/keda.sh_scaledobjects.yaml")
kubectl create "${crd_files[@]}" -f "$strimzi_old" -o name
kubectl wait --for condition=Established --timeout 30s "${crd_files[@]}" -f "$strimzi_old" >/dev/null
kubectl create namespace "$ns" -o name
kubectl label namespace "$ns" pod-security.kubernetes.io/{enforce,audit,warn}=restricted >/dev/null
# What the controller-manager would do: the namespace's default ServiceAccount, and the quota's usage
# (admission refuses every pod while a quota has no status).
kubectl create serviceaccount default -o name
quota="requests.cpu=20,limits.cpu=40,requests.memory=40Gi,limits.memory=80Gi,requests.ephemeral-storage=20Gi,limits.ephemeral-storage=80Gi"
kubectl create quota compute --hard "$quota" -o name
kubectl patch resourcequota compute --subresource status --type merge -p "$(python3 -c '
import json, sys
hard = dict(kv.split("=") for kv in sys.argv[1].split(","))
print(json.dumps({"status": {"hard": hard, "used": {k: "0" for k in hard}}}))' "$quota")" >/dev/null
# production-values.yaml names a PriorityClass and a Secret; the other Secrets it names (TLS CA,
# Kafka user, registry) are read by the kubelet only, which never runs here.
kubectl create priorityclass workauto --value 1000 -o name
keys=(platform-admin-token encryption-keys caller-signing-key caller-verify-keys agents-caller-signing-key)
for s in gateway identity crm-pipelines calendar webhooks apps agents; do keys+=("$s-database-url"); done
kubectl create secret generic workauto $(printf -- '--from-literal=%s=x ' "${keys[@]}") -o name
took "CRDs, namespace (restricted), quota, PriorityClass, Secret"

# --- checks on what the release put on the server ---------------------------------------------------
# A warning from the API server, as helm (klog) and kubectl print it.
server_warning='^(W[0-9]{4} .*warnings\.go:[0-9]+\]|Warning: )'
# helm_ok <what> <helm args…>: runs helm, failing on an error or on any warning from the server.
helm_ok() {
  local what="$1"; shift
  local out
  out=$(helm "$@" 2>&1) || { echo "$out"; fail "$what: the API server refused it (message above): fix the chart; if a release of the previous chart truly cannot be upgraded in place, document the step in docs/operations.md and take it here before the upgrade"; }
  if grep -E "$server_warning" <<<"$out" | grep -vE "${allowed_warning:-^\$}"; then fail "$what: the API server warned (above); fix the chart so it does not"; fi
  took "$what"
}
# dry_run_pods: every Deployment's pod and every `helm test` hook object, created with dryRun=All.
dry_run_pods() {
  local what="$1"
  { helm get manifest "$release"; echo "---"; helm get hooks "$release"; } > "$tmp/release.yaml"
  python3 - "$tmp/release.yaml" > "$tmp/pods.yaml" <<'PY'
import sys, yaml
out = []
for d in yaml.safe_load_all(open(sys.argv[1])):
    if not d: continue
    if d["kind"] == "Deployment":
        t = d["spec"]["template"]
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": d["metadata"]["name"] + "-dry-run", "labels": t["metadata"].get("labels", {})},
                    "spec": t["spec"]})
    elif "helm.sh/hook" in d["metadata"].get("annotations", {}):
        out.append(d)
if not any(d["kind"] == "Pod" for d in out): sys.exit("no pod template found in the release")
yaml.safe_dump_all(out, sys.stdout)
PY
  local out
  out=$(kubectl create --dry-run=server -f "$tmp/pods.yaml" -o name 2>&1) ||
    { echo "$out"; fail "$what: a pod of the release was refused (above), as it would be when its ReplicaSet creates it: fix its template"; }
  if grep -E "$server_warning" <<<"$out"; then fail "$what: the API server warned about a pod (above): fix its template"; fi
  log "$what: $(grep -c . <<<"$out") objects accepted (dry run): $(tr '\n' ' ' <<<"$out" | sed 's/pod\///g')"
  took "$what: pods and test hooks"
}
# refused <expected message> <what>: a broken variant of a release pod must be refused for that reason.
refused() {
  local expect="$1" what="$2" out
  if out=$(kubectl create --dry-run=server -f "$tmp/broken.yaml" -o name 2>&1); then
    fail "a pod $what was accepted ($out): the namespace set up above no longer enforces what this check relies on; fix that set-up"
  fi
  grep -q "$expect" <<<"$out" || fail "a pod $what was refused, but not with '$expect' ($out): a new admission rule came first; make the broken pod break only that rule"
  log "refused as it should be, a pod $what: $(sed 's/.*error when creating "[^"]*": //' <<<"$out" | cut -c1-200)"
}
broken() { # broken <python statement on pod `p` and container `c`>
  python3 - "$tmp/pods.yaml" "$1" > "$tmp/broken.yaml" <<'PY'
import sys, yaml
p = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "Pod")
p["metadata"]["name"] = "broken"
c = p["spec"]["containers"][0]
exec(sys.argv[2])
yaml.safe_dump(p, sys.stdout)
PY
}

# --- each earlier release, then an upgrade to this chart, then uninstall ------------------------------
values=(-f .ci/chart/production-values.yaml -f .ci/chart/platform-values.yaml)
# left_behind: fails if anything labelled with the release (or Helm's records of it) outlived its uninstall.
left_behind() {
  local left records
  left=$(kubectl get "$(kubectl api-resources --verbs list -o name | paste -sd, -)" -A \
    -l "app.kubernetes.io/instance=$release" -o json 2>"$tmp/get.err" | python3 -c '
import json, sys
for o in json.load(sys.stdin)["items"]:
    m = o["metadata"]
    kept = (m.get("annotations") or {}).get("helm.sh/resource-policy") == "keep"
    print(("kept (helm.sh/resource-policy: keep): " if kept else "") + o["kind"] + "/" + m["name"])') ||
    { cat "$tmp/get.err"; fail "listing what the release left failed (above); run again, or list fewer kinds"; }
  records=$(kubectl get secrets -l "owner=helm,name=$release" -o name)
  printf '%s\n%s\n' "$left" "$records" | grep -v '^kept' | grep . && fail "helm uninstall left the objects above behind: make them part of the release (or hooks with a delete policy), or annotate those meant to stay helm.sh/resource-policy: keep"
  [ -z "$left" ] || log "$left"
  took "nothing of the release left"
}
# strimzi_dry_run v1|v1beta2 accepted|refused: the chart's Strimzi resources of that version, created
# with a server-side dry run against the Strimzi CRDs installed, must be accepted (without a warning
# but v1beta2's deprecation) or refused for their version.
strimzi_dry_run() {
  local version="$1" want="$2" out
  helm template "$release" "$chart" "${values[@]}" --kube-version "${K8S_VERSION#v}" \
    --set kafka.strimzi.apiVersion="kafka.strimzi.io/$version" --show-only templates/strimzi.yaml > "$tmp/strimzi.yaml"
  if out=$(kubectl create --dry-run=server -f "$tmp/strimzi.yaml" -o name 2>&1); then
    [ "$want" = accepted ] || fail "Strimzi's CRDs accepted kafka.strimzi.io/$version resources ($out): they are not the CRDs of the release meant"
    if grep -E "$server_warning" <<<"$out" | grep -vE 'Version v1beta2 of the Kafka(Topic|User) API is deprecated'; then
      fail "the API server warned about the kafka.strimzi.io/$version resources (above)"
    fi
    log "kafka.strimzi.io/$version resources accepted by Strimzi's CRDs (dry run): $(grep -c '^kafka' <<<"$out") objects"
  else
    [ "$want" = refused ] || { echo "$out"; fail "Strimzi's CRDs refused the chart's kafka.strimzi.io/$version resources (above): fix templates/strimzi.yaml"; }
    grep -q "no matches for kind \"KafkaTopic\" in version \"kafka.strimzi.io/$version\"" <<<"$out" ||
      fail "kafka.strimzi.io/$version resources were refused, but not for their version: $out"
    log "refused as it should be: $(head -1 <<<"$out" | sed 's/.*: no matches/no matches/' | cut -c1-120)"
  fi
  took "Strimzi resources, kafka.strimzi.io/$version"
}
previous_ref=$(grep -v '^\s*#' .ci/previous-release | grep -m1 .)
releases=$(grep -v '^\s*#' .ci/releases | grep .)
grep -q " $previous_ref\$" <<<"$releases" || fail ".ci/previous-release ($previous_ref) is not the last line of .ci/releases: add the release there"
while read -r version ref; do
  git cat-file -e "$ref^{commit}" 2>/dev/null ||
    fail "release $version's commit $ref (.ci/releases) is not in this clone: a shallow clone? git fetch --unshallow, or fetch that commit"
  rm -rf "$tmp/previous" && mkdir -p "$tmp/previous"
  git archive "$ref" "$chart" | tar -x -C "$tmp/previous" || fail "$chart could not be read at $ref (above): fix .ci/releases"
  # Its own production-like values if it had them; else what every version of the chart needs.
  previous_values=(--set kafka.brokers=kafka-0.kafka:9093 --set secrets.existingSecret=workauto)
  if git cat-file -e "$ref:.ci/chart/production-values.yaml" 2>/dev/null; then
    git show "$ref:.ci/chart/production-values.yaml" > "$tmp/previous/values.yaml"
    previous_values=(-f "$tmp/previous/values.yaml")
  fi
  out=$(helm install "$release" "$tmp/previous/$chart" "${previous_values[@]}" 2>&1) ||
    { echo "$out"; fail "installing release $version ($ref) failed (above): the set-up above lacks what it needs, or .ci/releases names a broken commit"; }
  # Warnings are expected of releases that predate the restricted pods: counted, not failed on.
  warnings=$(grep -cE "$server_warning" <<<"$out" || true)
  [ "$warnings" = 0 ] || log "chart $version drew $warnings warnings, e.g. $(grep -m1 -E "$server_warning" <<<"$out" | sed -E "s/$server_warning *//" | cut -c1-160)…"
  took "helm install of chart $version ($ref)"
  helm_ok "helm upgrade from $version to the working tree's chart" upgrade "$release" "$chart" "${values[@]}"
  if [ "$ref" = "$previous_ref" ]; then
    dry_run_pods "upgraded release"
    helm_ok "helm upgrade again, nothing changed" upgrade "$release" "$chart" "${values[@]}"
    broken 'del p["spec"]["securityContext"]; c.pop("securityContext", None)'
    refused "violates PodSecurity" "without a security context"
    broken 'c.pop("resources", None)'
    refused "must specify" "without resource requests and limits"
    took "broken pods refused"
  fi
  helm_ok "helm uninstall (from $version)" uninstall "$release"
  left_behind
done <<<"$releases"

# kafka.strimzi.apiVersion=v1beta2 (operators before 0.49): its resources as Strimzi 0.51's CRDs judge them.
strimzi_dry_run v1beta2 accepted

# --- Strimzi 1.x: its CRDs serve v1 only ------------------------------------------------------------
kubectl delete -f "$strimzi_old" -o name --wait >/dev/null
kubectl create -f "$strimzi_new" -o name
kubectl wait --for condition=Established --timeout 30s -f "$strimzi_new" >/dev/null
rm -rf "$tmp/kubectl-cache"
strimzi_dry_run v1 accepted
strimzi_dry_run v1beta2 refused
log "all checks passed"
