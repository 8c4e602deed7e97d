#!/usr/bin/env python3
"""What the chart must do, asserted on its renders as an operator would notice it.

.ci/chart-check.sh renders one file per scenario into a folder and runs: checks.py <folder>.
Each check names the scenario and the object; any failure exits 1.
"""
import json
import os
import re
import sys

import yaml

import promql_parser  # PyPI promql-parser, installed into .cache by chart-check.sh

renders = sys.argv[1]
problems = []
NAMESPACE = "default"  # helm template's namespace


def fail(scenario, msg):
    problems.append(f"{scenario}: {msg}")


_loaded = {}


def load(scenario):
    if scenario not in _loaded:
        with open(os.path.join(renders, f"{scenario}.yaml")) as f:
            _loaded[scenario] = [d for d in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
    return _loaded[scenario]


def check_names():
    """Object names: DNS-1035 labels (Services) / DNS-1123 subdomains, at most 63 characters here."""
    for file in sorted(os.listdir(renders)):
        if not file.endswith(".yaml"):
            continue
        scenario = file[: -len(".yaml")]
        for d in load(scenario):
            n = d["metadata"]["name"]
            if len(n) > 63 or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", n):
                fail(scenario, f"invalid object name (a DNS label of at most 63 characters is needed): {d['kind']}/{n}")


def by_kind(docs, kind):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def component(doc):
    return doc["metadata"]["labels"].get("app.kubernetes.io/component")


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def cpu(quantity):
    q = str(quantity)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def main_container(deployment):
    spec = deployment["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == component(deployment))


# --- NetworkPolicy reachability ------------------------------------------------------------------
# A small evaluator of the NetworkPolicy rules the chart renders (selectors, named and numbered
# ports, namespaceSelector by kubernetes.io/metadata.name), so checks say "X can reach Y" instead
# of comparing YAML.


def selects(selector, labels):
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        op, key, values = e["operator"], e["key"], e.get("values") or []
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and labels.get(key) in values)
            or (op == "Exists" and key not in labels)
            or (op == "DoesNotExist" and key in labels)
        ):
            return False
    return True


def peer_matches(peer, pod, policy_namespace):
    if "ipBlock" in peer:
        return False  # pods are matched by selectors here
    ns_selector = peer.get("namespaceSelector")
    if ns_selector is None:
        in_namespace = pod["namespace"] == policy_namespace
    else:
        in_namespace = selects(ns_selector, {"kubernetes.io/metadata.name": pod["namespace"]})
    return in_namespace and selects(peer.get("podSelector") or {}, pod["labels"])


def port_matches(rule, target, port):
    """port: the destination container port's number; target: the destination pod (named ports)."""
    if not rule.get("ports"):
        return True
    for p in rule["ports"]:
        if p.get("protocol", "TCP") != "TCP":
            continue
        want = p.get("port")
        if want is None or want == port or target["ports"].get(want) == port:
            return True
    return False


def allowed(policies, direction, subject, other, target, port):
    """Whether `subject`'s policies let traffic in (from `other`) or out (to `other`)."""
    selecting = [
        p
        for p in policies
        if p["namespace"] == subject["namespace"]
        and direction in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"]["podSelector"], subject["labels"])
    ]
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for p in selecting:
        for rule in p["spec"].get(key) or []:
            peers = rule.get(peers_key)
            if (peers is None or any(peer_matches(peer, other, p["namespace"]) for peer in peers)) and port_matches(
                rule, target, port
            ):
                return True
    return False


def reachable(policies, src, dst, port_name):
    port = dst["ports"][port_name]
    return allowed(policies, "Egress", src, dst, dst, port) and allowed(policies, "Ingress", dst, src, dst, port)


def pods_of(docs):
    """The release's pods by component: Deployments' templates, the test pod, Jobs' templates."""
    pods = {}
    for d in docs:
        if d["kind"] == "Pod":
            meta, spec = d["metadata"], d["spec"]
        elif d["kind"] in ("Deployment", "Job"):
            meta, spec = d["spec"]["template"]["metadata"], d["spec"]["template"]["spec"]
        else:
            continue
        ports = {p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", []) if "name" in p}
        key = meta["labels"]["app.kubernetes.io/component"]
        if d["kind"] == "Job":
            key = f"{key}:{meta['labels'].get('workauto.io/migrates')}"
        pods[key] = {
            "namespace": NAMESPACE,
            "labels": meta["labels"],
            "ports": ports,
        }
    return pods


def policies_of(docs):
    return [
        {"namespace": d["metadata"].get("namespace", NAMESPACE), "spec": d["spec"], "name": d["metadata"]["name"]}
        for d in docs
        if d["kind"] == "NetworkPolicy"
    ]


OUTSIDERS = {
    "the ingress controller": {"namespace": "ingress-nginx", "labels": {"app": "ingress-nginx"}, "ports": {}},
    "a pod of another namespace": {"namespace": "other", "labels": {"app": "other"}, "ports": {}},
    "a pod of the release's namespace": {"namespace": NAMESPACE, "labels": {"app": "neighbour"}, "ports": {}},
    "Prometheus": {"namespace": "monitoring", "labels": {"app": "prometheus"}, "ports": {}},
}


def check_network(scenario, docs, gateway_from_set):
    policies, pods = policies_of(docs), pods_of(docs)
    services = [c for c, p in pods.items() if "grpc" in p["ports"]]
    callers = {"agents": {"notes-tasks", "crm-pipelines", "calendar", "apps"}}

    def expect(src_name, src, dst_name, port, want):
        if dst_name not in pods:
            return
        got = reachable(policies, src, pods[dst_name], port)
        if got != want:
            fail(scenario, f"{src_name} {'cannot' if want else 'can'} reach {dst_name}:{port}")

    if "helm-test" in pods:
        # helm test calls the gateway's /readyz and every service's health.
        expect("the helm test pod", pods["helm-test"], "gateway", "http", True)
        for s in services:
            expect("the helm test pod", pods["helm-test"], s, "grpc", True)
    expect("the ingress controller", OUTSIDERS["the ingress controller"], "gateway", "http", True)
    expect("a pod of another namespace", OUTSIDERS["a pod of another namespace"], "gateway", "http", not gateway_from_set)
    for s in services:
        expect("the gateway", pods["gateway"], s, "grpc", True)
        for outsider in ("a pod of the release's namespace", "a pod of another namespace"):
            expect(outsider, OUTSIDERS[outsider], s, "grpc", False)
        for other in services:
            if other != s:
                expect(other, pods[other], s, "grpc", s in callers.get(other, set()))
    for c, pod in pods.items():
        if "metrics" in pod["ports"]:
            expect("Prometheus", OUTSIDERS["Prometheus"], c, "metrics", True)


def check_metrics_exposure(scenario, docs):
    """Metrics stay inside the cluster, and the ServiceMonitor (when rendered) scrapes every workload."""
    services = by_kind(docs, "Service")
    public = {n for n, s in services.items() if s["spec"].get("type") in ("LoadBalancer", "NodePort")}
    for ing in by_kind(docs, "Ingress").values():
        for rule in ing["spec"].get("rules") or []:
            for path in rule.get("http", {}).get("paths", []):
                public.add(path["backend"]["service"]["name"])
    pods = pods_of(docs)
    for name in public:
        for port in services[name]["spec"]["ports"]:
            target = port.get("targetPort")
            if target == "metrics" or any(target == p.get("metrics") for p in pods.values()):
                fail(scenario, f"Service {name} is public ({services[name]['spec'].get('type', 'ClusterIP')}, or an Ingress backend) and exposes the metrics port")
    for sm in by_kind(docs, "ServiceMonitor").values():
        ports = {e["port"] for e in sm["spec"]["endpoints"]}
        scraped = set()
        for s in services.values():
            if not selects(sm["spec"]["selector"], s["metadata"]["labels"]):
                continue
            if not any(p["name"] in ports for p in s["spec"]["ports"]):
                continue
            if s["metadata"]["name"] in public:
                fail(scenario, f"ServiceMonitor {sm['metadata']['name']} scrapes the public Service {s['metadata']['name']}")
            scraped |= {c for c, pod in pods.items() if selects({"matchLabels": s["spec"]["selector"]}, pod["labels"])}
        for c, pod in pods.items():
            if "metrics" in pod["ports"] and c not in scraped:
                fail(scenario, f"ServiceMonitor {sm['metadata']['name']} does not scrape {c}")


# --- scenarios -----------------------------------------------------------------------------------


def check_production(scenario="production"):
    docs = load(scenario)
    deployments, hpas, services = by_kind(docs, "Deployment"), by_kind(docs, "HorizontalPodAutoscaler"), by_kind(docs, "Service")
    encryption_readers = {"gateway", "identity", "webhooks", "apps", "agents"}
    for name, d in deployments.items():
        c, spec = component(d), d["spec"]["template"]["spec"]
        container = main_container(d)
        env = env_of(container)
        if name in hpas and "replicas" in d["spec"]:
            fail(scenario, f"{name}: has replicas although an HPA scales it")
        if ("ENCRYPTION_KEYS" in env) != (c in encryption_readers):
            fail(scenario, f"{name}: ENCRYPTION_KEYS {'given to a service that never reads it' if 'ENCRYPTION_KEYS' in env else 'missing'}")
        if spec.get("automountServiceAccountToken") is not False:
            fail(scenario, f"{name}: the service account token is mounted")
        pre = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        drain = 5 + 1 if c == "gateway" else 10 + 10 + 2  # gateway: deadline + 1 s; services: workers + gRPC drain + closing
        if spec["terminationGracePeriodSeconds"] <= pre + drain:
            fail(scenario, f"{name}: grace {spec['terminationGracePeriodSeconds']} s does not cover preStop {pre} s + drain {drain} s")
        zones = [c for c in spec.get("topologySpreadConstraints", []) if c["topologyKey"] == "topology.kubernetes.io/zone"]
        if not zones or zones[0]["whenUnsatisfiable"] != "DoNotSchedule":
            fail(scenario, f"{name}: three replicas may land in two zones (zone spread {zones and zones[0]['whenUnsatisfiable']}, not DoNotSchedule)")
        if "podAntiAffinity" not in spec.get("affinity", {}):
            fail(scenario, f"{name}: no podAntiAffinity although production values ask for it")
        # Its own ServiceAccount (a cloud identity per service), without a token.
        if spec.get("serviceAccountName") != name:
            fail(scenario, f"{name}: ServiceAccount {spec.get('serviceAccountName')}, not its own")
        # Every Secret the pod reads at start is one Reloader watches (secrets.reloader).
        watched = set(d["metadata"].get("annotations", {}).get("secret.reloader.stakater.com/reload", "").split(","))
        read = {e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
        read |= {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v and "token" not in v["name"]}
        if read - watched:
            fail(scenario, f"{name}: Reloader does not watch {sorted(read - watched)}, which the pod reads at start")
    # An HPA scales out at target × request; a Node process can use about one core (its limit). A
    # point far below the limit adds pods while each still idles (chart 0.2: 70 % of 100m, 7 %).
    for name, hpa in hpas.items():
        res = main_container(deployments[name])["resources"]
        target = hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] / 100
        point = target * cpu(res["requests"]["cpu"]) / cpu(res["limits"]["cpu"])
        if point < 0.2:
            fail(scenario, f"{name}: the HPA scales out at {point:.0%} of the CPU a pod may use ({target:.0%} of {res['requests']['cpu']}, limit {res['limits']['cpu']})")
    for name, svc in services.items():
        if component(svc) != "gateway" and svc["spec"].get("clusterIP") != "None":
            fail(scenario, f"{name}: a gRPC Service must be headless (per-call balancing)")
    check_network(scenario, docs, gateway_from_set=True)
    check_metrics_exposure(scenario, docs)
    check_strimzi(scenario, docs, "events", "workauto.", "scram-sha-512")
    # production-values.yaml: PostgreSQL's CA and an internal CA for Node, from defaults, reach every workload.
    for name, d in deployments.items():
        container = main_container(d)
        volumes = {v["name"]: v for v in d["spec"]["template"]["spec"].get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        if volumes.get(mounts.get("/etc/workauto/postgres-ca"), {}).get("secret", {}).get("secretName") != "postgres-ca":
            fail(scenario, f"{name}: the PostgreSQL CA (extraVolumes, extraVolumeMounts) is not mounted")
        if env_of(container).get("NODE_EXTRA_CA_CERTS", {}).get("value") != "/etc/workauto/internal-ca/ca.crt":
            fail(scenario, f"{name}: NODE_EXTRA_CA_CERTS is not set")
        if env_of(container).get("DATABASE_POOL_MAX", {}).get("value") != ("5" if component(d) == "gateway" else "10"):
            fail(scenario, f"{name}: DATABASE_POOL_MAX is {env_of(container).get('DATABASE_POOL_MAX')}, not databasePoolMax")
        # gateway.publicBaseUrl: the origin of the feed URLs it hands out, the gateway's alone.
        base = env_of(container).get("PUBLIC_BASE_URL", {}).get("value")
        if base != ("https://api.example.com" if component(d) == "gateway" else None):
            fail(scenario, f"{name}: PUBLIC_BASE_URL is {base!r}")
    print(f"checks.py: {scenario}: {len(deployments)} Deployments, {len(services)} Services")


def check_default():
    check_network("default", load("default"), gateway_from_set=False)


def check_edge():
    """Valid values a platform may well use: a LoadBalancer gateway, an Ingress without hosts, apps off."""
    scenario = "edge"
    docs = load(scenario)
    check_metrics_exposure(scenario, docs)
    check_network(scenario, docs, gateway_from_set=False)
    gateway_services = [n for n, s in by_kind(docs, "Service").items() if component(s) == "gateway" and s["spec"].get("type") == "LoadBalancer"]
    for ing in by_kind(docs, "Ingress").values():
        backends = [
            (p["backend"]["service"]["name"], p["backend"]["service"]["port"].get("name"))
            for rule in ing["spec"].get("rules") or []
            for p in rule.get("http", {}).get("paths", [])
        ]
        if not backends or any(b != (gateway_services[0], "http") for b in backends):
            fail(scenario, f"Ingress {ing['metadata']['name']} without hosts routes nothing to the gateway: rules {ing['spec'].get('rules')}")
    deployments = {component(d): d for d in by_kind(docs, "Deployment").values()}
    if "apps" in deployments:
        fail(scenario, "services.apps.enabled=false still renders apps")
    if "APPS_ADDR" in env_of(main_container(deployments["agents"])):
        fail(scenario, "agents get APPS_ADDR although apps is not deployed (their tool calls would wait on a name that never resolves)")


def check_overrides():
    """Production values plus one workload's own settings: the defaults it does not name still apply."""
    scenario = "overrides"
    docs = load(scenario)
    deployments = {component(d): d for d in by_kind(docs, "Deployment").values()}
    hpas = {component(d): d for d in by_kind(docs, "HorizontalPodAutoscaler").values()}
    pdbs = {component(d): d for d in by_kind(docs, "PodDisruptionBudget").values()}
    resources = main_container(deployments["agents"]).get("resources", {})
    if resources.get("limits", {}).get("memory") != "1Gi":
        fail(scenario, f"agents: memory limit {resources.get('limits', {}).get('memory')}, not the 1Gi it set")
    if not resources.get("requests", {}).get("cpu") or not resources.get("limits", {}).get("cpu"):
        fail(scenario, f"agents: setting limits.memory dropped the default requests or CPU limit: {resources}")
    hpa = hpas.get("agents")
    if not hpa or hpa["spec"]["maxReplicas"] != 20 or hpa["spec"]["minReplicas"] != 3:
        fail(scenario, f"agents: autoscaling.maxReplicas=20 should keep the default HPA (min 3) with max 20; got {hpa and hpa['spec']}")
    if "replicas" in deployments["agents"]["spec"]:
        fail(scenario, "agents: has replicas although an HPA scales it")
    pdb = pdbs.get("agents")
    if not pdb or pdb["spec"].get("maxUnavailable") != 2:
        fail(scenario, f"agents: pdb.maxUnavailable=2 should keep the PDB with maxUnavailable 2; got {pdb and pdb['spec']}")
    for c, d in deployments.items():
        if env_of(main_container(d)).get("NODE_OPTIONS", {}).get("value") != "--max-old-space-size=384":
            fail(scenario, f"{c}: defaults.env.NODE_OPTIONS does not reach it")
    print(f"checks.py: {scenario}: {len(deployments)} Deployments")


# --- Kafka as Strimzi runs it --------------------------------------------------------------------
STRIMZI = "kafka.strimzi.io/v1"  # the default (Strimzi 1.x); chart-install also installs v1beta2 on 0.51's CRDs
ACL_OPERATIONS = {"Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "All"}


def check_strimzi_shape(scenario, docs, cluster):
    """kubeconform knows no Strimzi CRDs: the fields the operators read, checked here."""
    for d in docs:
        if d["kind"] not in ("KafkaTopic", "KafkaUser"):
            continue
        where = f"{d['kind']} {d['metadata']['name']}"
        if d["apiVersion"] != STRIMZI:
            fail(scenario, f"{where}: apiVersion {d['apiVersion']}, not {STRIMZI}")
        if d["metadata"]["labels"].get("strimzi.io/cluster") != cluster:
            fail(scenario, f"{where}: label strimzi.io/cluster is not {cluster}")
        spec = d["spec"]
        if d["kind"] == "KafkaTopic":
            if set(spec) - {"topicName", "partitions", "replicas", "config"}:
                fail(scenario, f"{where}: unknown fields {set(spec) - {'topicName', 'partitions', 'replicas', 'config'}}")
            if not all(isinstance(spec.get(k), int) and spec[k] >= 1 for k in ("partitions", "replicas")):
                fail(scenario, f"{where}: partitions and replicas must be positive integers: {spec}")
            if not all(isinstance(v, (str, int, float, bool)) for v in spec.get("config", {}).values()):
                fail(scenario, f"{where}: config values must be scalars")
        else:
            if spec.get("authentication", {}).get("type") not in ("scram-sha-512", "tls", "tls-external"):
                fail(scenario, f"{where}: authentication {spec.get('authentication')}")
            authz = spec.get("authorization", {})
            if authz.get("type") != "simple" or not authz.get("acls"):
                fail(scenario, f"{where}: no simple authorization with ACLs")
            for acl in authz.get("acls", []):
                r = acl.get("resource", {})
                if r.get("type") not in ("topic", "group", "cluster", "transactionalId") or (
                    r.get("type") != "cluster" and (not r.get("name") or r.get("patternType") not in ("literal", "prefix"))
                ):
                    fail(scenario, f"{where}: bad ACL resource {r}")
                if not acl.get("operations") or set(acl["operations"]) - ACL_OPERATIONS:
                    fail(scenario, f"{where}: bad ACL operations {acl.get('operations')}")


def acl_allows(user, rtype, name, operation):
    for acl in user["spec"]["authorization"]["acls"]:
        r = acl["resource"]
        if r["type"] != rtype or operation not in acl["operations"]:
            continue
        if (r["patternType"] == "literal" and r["name"] in (name, "*")) or (r["patternType"] == "prefix" and name.startswith(r["name"])):
            return True
    return False


def check_strimzi(scenario, docs, cluster, prefix, authentication):
    """The chart's KafkaTopics are the topics the services use, and its KafkaUser is who they connect as."""
    check_strimzi_shape(scenario, docs, cluster)
    topics = {d["spec"]["topicName"] for d in docs if d["kind"] == "KafkaTopic"}
    want = {f"{prefix}workauto.audit.v1", f"{prefix}workauto.domain-events.v1", f"{prefix}workauto.dead-letter.v1"}
    if topics != want:
        fail(scenario, f"KafkaTopics {sorted(topics)}, not the topics the services use {sorted(want)}")
    users = [d for d in docs if d["kind"] == "KafkaUser"]
    if len(users) != 1:
        fail(scenario, f"{len(users)} KafkaUsers, expected 1")
        return
    user = users[0]
    name = user["metadata"]["name"]
    if user["spec"]["authentication"]["type"] != authentication:
        fail(scenario, f"KafkaUser {name}: authentication {user['spec']['authentication']['type']}, not {authentication}")
    groups = {"identity": "identity.audit-log", "webhooks": "webhooks.intake"}  # the services' consumer groups
    for t in want:
        for op in ("Describe", "Read", "Write"):
            if not acl_allows(user, "topic", t, op):
                fail(scenario, f"KafkaUser {name} may not {op} {t}")
    for g in groups.values():
        for op in ("Describe", "Read"):
            if not acl_allows(user, "group", prefix + g, op):
                fail(scenario, f"KafkaUser {name} may not {op} the consumer group {prefix + g}")
    for d in by_kind(docs, "Deployment").values():
        if component(d) == "gateway":
            continue
        c = main_container(d)
        env = env_of(c)
        spec = d["spec"]["template"]["spec"]
        where = d["metadata"]["name"]
        if env["KAFKA_CREATE_TOPICS"]["value"] != "false":
            fail(scenario, f"{where}: KAFKA_CREATE_TOPICS is not false although the chart makes the topics")
        if env["KAFKA_NAMESPACE"]["value"] != prefix:
            fail(scenario, f"{where}: KAFKA_NAMESPACE {env['KAFKA_NAMESPACE']['value']!r}, not the topics' prefix {prefix!r}")
        if authentication == "scram-sha-512":
            # Strimzi's user Secret holds password and sasl.jaas.config, no username: the username is the user's name.
            if env.get("KAFKA_SASL_MECHANISM", {}).get("value") != "scram-sha-512" or env.get("KAFKA_SASL_USERNAME", {}).get("value") != name:
                fail(scenario, f"{where}: SASL is not scram-sha-512 as the KafkaUser {name}: {env.get('KAFKA_SASL_USERNAME')}")
            if env.get("KAFKA_SASL_PASSWORD", {}).get("valueFrom", {}).get("secretKeyRef") != {"name": name, "key": "password"}:
                fail(scenario, f"{where}: the SASL password is not the key password of the Secret {name}")
        else:
            volumes = {v["name"]: v for v in spec["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            for var, key in (("KAFKA_TLS_CERT_FILE", "user.crt"), ("KAFKA_TLS_KEY_FILE", "user.key")):
                path = env.get(var, {}).get("value", "")
                volume = volumes.get(mounts.get(os.path.dirname(path)), {})
                if os.path.basename(path) != key or volume.get("secret", {}).get("secretName") != name:
                    fail(scenario, f"{where}: {var} is not {key} of the Secret {name}")
            if env.get("KAFKA_TLS", {}).get("value") != "true" or "KAFKA_SASL_MECHANISM" in env:
                fail(scenario, f"{where}: mTLS needs KAFKA_TLS=true and no SASL")


def check_kafka_mtls():
    check_strimzi("kafka-mtls", load("kafka-mtls"), "events", "workauto.", "tls")


def check_plain_username():
    """A SASL username given as a value, the password from a Secret's key."""
    scenario = "made-secret"
    for d in by_kind(load(scenario), "Deployment").values():
        if component(d) == "gateway":
            continue
        env = env_of(main_container(d))
        if env.get("KAFKA_SASL_USERNAME", {}).get("value") != "workauto":
            fail(scenario, f"{d['metadata']['name']}: KAFKA_SASL_USERNAME is not the value kafka.sasl.username")


# --- dashboard and alerts --------------------------------------------------------------------------
# The series the code exports, as /metrics shows them (run a service with METRICS_PORT set and curl
# it: dots become underscores, counters get _total, histograms _bucket/_count/_sum; units add no
# suffix). A panel or an alert on any other name would stay empty.
EXPORTED = {
    "http_server_request_duration": "histogram",  # gateway (HTTP instrumentation): method, status; no route
    "rpc_server_call_duration": "histogram",  # libs/grpc: rpc_service, rpc_method, rpc_grpc_status_code
    "workauto_downstream_down": "gauge",  # libs/grpc: service
    "workauto_downstream_short_circuited_total": "counter",  # libs/grpc: service, reason
    "workauto_gateway_rate_limited_total": "counter",
    "workauto_outbox_backlog": "gauge",  # libs/events: source
    "workauto_outbox_publish_failures_total": "counter",
    "workauto_events_consumer_lag": "gauge",  # libs/events: group, topic, partition
    "workauto_events_dead_lettered_total": "counter",  # libs/events: group, topic
    "workauto_jobs_waiting": "gauge",  # libs/jobs: queue
    "workauto_jobs_oldest_wait": "gauge",
    "workauto_jobs_running": "gauge",
}
KUBE_STATE_METRICS = {"kube_deployment_spec_replicas", "kube_deployment_status_replicas_available", "kube_pod_container_status_restarts_total"}
KNOWN = KUBE_STATE_METRICS | {n for n, t in EXPORTED.items() if t != "histogram"} | {
    f"{n}_{s}" for n, t in EXPORTED.items() if t == "histogram" for s in ("bucket", "count", "sum")
}


def promql_problems(expr):
    """Parse errors and unknown metric names of one expression."""
    try:
        tree = promql_parser.parse(expr)
    except Exception as e:  # the parser raises ValueError-like errors with the position
        return [f"does not parse ({e}): {expr}"]
    names = set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)
        for attr in ("expr", "lhs", "rhs", "param", "vector_selector"):
            child = getattr(node, attr, None)
            if isinstance(child, promql_parser.Expr):
                visit(child)
        for arg in getattr(node, "args", None) or []:
            visit(arg)

    visit(tree)
    return [f"reads {n}, which nothing exports" for n in sorted(names - KNOWN)] + ([] if names else [f"reads no metric: {expr}"])


def github_anchors(markdown_path):
    anchors = set()
    for line in open(markdown_path):
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


def check_observability():
    scenario = "production"
    docs = load(scenario)
    dashboards = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard") == "1"]
    if len(dashboards) != 1:
        fail(scenario, f"{len(dashboards)} ConfigMaps with the Grafana sidecar's label grafana_dashboard: \"1\"")
    for cm in dashboards:
        for key, text in cm["data"].items():
            dash = json.loads(text)
            if len(dash.get("uid", "")) > 40 or "__" in dash.get("title", "__"):
                fail(scenario, f"dashboard {key}: uid {dash.get('uid')!r} or title {dash.get('title')!r}")
            exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
            if len(exprs) < 15:
                fail(scenario, f"dashboard {key}: {len(exprs)} queries")
            for e in exprs:
                for problem in promql_problems(e.replace("$__rate_interval", "5m")):
                    fail(scenario, f"dashboard {key}: a query {problem}")
                if 'namespace="default"' not in e:
                    fail(scenario, f"dashboard {key}: a query reads other releases' series: {e}")
    rules = by_kind(docs, "PrometheusRule")
    anchors = github_anchors(os.path.join(os.path.dirname(__file__), "../../docs/operations.md"))
    alerts = [r for pr in rules.values() for g in pr["spec"]["groups"] for r in g["rules"]]
    want = {"Workauto" + a for a in ("GatewayErrors", "ServiceErrors", "GatewayLatency", "ServiceLatency", "ServiceDown", "OutboxBacklog", "ConsumerLag", "DeadLetters", "QueueBackingUp", "PodsNotReady")}
    if {a.get("alert") for a in alerts} != want:
        fail(scenario, f"alerts {sorted(a.get('alert') for a in alerts)}, expected {sorted(want)}")
    for a in alerts:
        where = f"alert {a.get('alert')}"
        if set(a) - {"alert", "expr", "for", "labels", "annotations"} or not re.fullmatch(r"[0-9]+[smh]", a.get("for", "")):
            fail(scenario, f"{where}: fields {sorted(a)}, for {a.get('for')!r}")
        if a.get("labels", {}).get("severity") not in ("critical", "warning") or a["labels"].get("team") != "platform":
            fail(scenario, f"{where}: labels {a.get('labels')}")
        for problem in promql_problems(a["expr"]):
            fail(scenario, f"{where}: its expression {problem}")
        url = a.get("annotations", {}).get("runbook_url", "")
        if not url.startswith("https://") or url.split("#")[-1] not in anchors:
            fail(scenario, f"{where}: runbook_url {url!r} is not a section of docs/operations.md")
        if not a.get("annotations", {}).get("summary"):
            fail(scenario, f"{where}: no summary")
    print(f"checks.py: {scenario}: a dashboard of {sum(len(json.loads(t)['panels']) for cm in dashboards for t in cm['data'].values())} panels, {len(alerts)} alerts")


# --- migrations ----------------------------------------------------------------------------------
HOOK_PHASES = {"pre-install", "pre-upgrade"}


def hook_weight(doc):
    return int(doc["metadata"].get("annotations", {}).get("helm.sh/hook-weight", "0"))


def check_migrations_job():
    """migrations.mode=job: a pre-install/pre-upgrade Job per workload, which can run before anything else exists."""
    scenario = "migrations-job"
    docs = load(scenario)
    deployments = {component(d): d for d in by_kind(docs, "Deployment").values()}
    jobs = {d["spec"]["template"]["metadata"]["labels"].get("workauto.io/migrates"): d for d in by_kind(docs, "Job").values()}
    if set(jobs) != set(deployments):
        fail(scenario, f"migration Jobs for {sorted(j for j in jobs if j)}, workloads {sorted(deployments)}")
    hooks = [d for d in docs if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    for c, d in deployments.items():
        if env_of(main_container(d)).get("MIGRATE_ON_START", {}).get("value") != "false":
            fail(scenario, f"{c}: MIGRATE_ON_START is not false although a Job migrates")
        job = jobs.get(c)
        if not job:
            continue
        where = f"Job {job['metadata']['name']}"
        a = job["metadata"].get("annotations", {})
        if set(a.get("helm.sh/hook", "").split(",")) != HOOK_PHASES:
            fail(scenario, f"{where}: hook {a.get('helm.sh/hook')!r}, not pre-install,pre-upgrade")
        if set(a.get("helm.sh/hook-delete-policy", "").split(",")) != {"before-hook-creation", "hook-succeeded"}:
            fail(scenario, f"{where}: hook-delete-policy {a.get('helm.sh/hook-delete-policy')!r}")
        js = job["spec"]
        if not (0 <= js.get("backoffLimit", 6) <= 3) or not js.get("activeDeadlineSeconds"):
            fail(scenario, f"{where}: needs a small backoffLimit and an activeDeadlineSeconds: {js.get('backoffLimit')}, {js.get('activeDeadlineSeconds')}")
        pod = js["template"]["spec"]
        container = next(x for x in pod["containers"] if x["name"] == "migrate")
        workload = main_container(d)
        if container["args"] != [workload["args"][0], "migrate"] or container["image"] != workload["image"]:
            fail(scenario, f"{where}: does not run `{workload['args'][0]} migrate` with the workload's image")
        if pod.get("restartPolicy") != "Never" or pod.get("containers", [])[1:]:
            fail(scenario, f"{where}: a Job pod must run its one container once (sidecars as native initContainers)")
        if env_of(container)["DATABASE_URL"] != env_of(workload)["DATABASE_URL"]:
            fail(scenario, f"{where}: DATABASE_URL differs from the workload's")
        # Only what `migrate` reads: no other Secret (admin token, keyring, signing keys, provider keys).
        extra = set(env_of(container)) - {"DATABASE_URL", "LOG_LEVEL", "MIGRATION_LOCK_TIMEOUT_MS", "NODE_OPTIONS", "NODE_EXTRA_CA_CERTS"}
        secrets = [e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {}) and e["name"] != "DATABASE_URL"]
        if extra or secrets or container.get("envFrom"):
            fail(scenario, f"{where}: gets {sorted(extra)} {secrets} {container.get('envFrom')}, which migrating never reads")
        rules = js.get("podFailurePolicy", {}).get("rules", [])
        if not any(r["action"] == "Ignore" and any(c.get("type") == "DisruptionTarget" for c in r.get("onPodConditions", [])) for r in rules):
            fail(scenario, f"{where}: a node drain's eviction would spend the backoffLimit (no podFailurePolicy ignoring DisruptionTarget)")
        if any(m["name"].startswith("kafka") for m in container.get("volumeMounts", [])):
            fail(scenario, f"{where}: mounts Kafka's credentials, which migrating does not use")
        sidecars = {x["name"] for x in d["spec"]["template"]["spec"].get("initContainers", [])}
        if sidecars - {x["name"] for x in pod.get("initContainers", [])}:
            fail(scenario, f"{where}: lacks the workload's init containers and native sidecars {sorted(sidecars)}")
        # Everything the pod needs exists before the Job: a hook of lower weight, or not the chart's.
        sa = pod.get("serviceAccountName")
        made = {x["metadata"]["name"]: x for x in docs if x["kind"] == "ServiceAccount"}
        if sa in made and not (made[sa] in hooks and hook_weight(made[sa]) < hook_weight(job)):
            fail(scenario, f"{where}: its ServiceAccount {sa} is the release's, created after pre-install hooks")
        if any(x["kind"] == "Secret" and x not in hooks for x in docs):
            fail(scenario, "the chart makes a Secret, which a pre-install hook cannot read")
    # The Jobs reach PostgreSQL although the release's NetworkPolicies do not exist yet at pre-install.
    policies = [p for p in policies_of(docs) if any(h["kind"] == "NetworkPolicy" and h["metadata"]["name"] == p["name"] for h in hooks)]
    pods = pods_of(docs)
    postgres = {"namespace": "databases", "labels": {"app": "postgresql"}, "ports": {"postgresql": 5432}}
    for key, pod in pods.items():
        if key.startswith("migrations:") and not (
            policies and allowed(policies, "Egress", pod, postgres, postgres, 5432)
        ):
            fail(scenario, f"{key}: no hook NetworkPolicy lets the Job reach PostgreSQL")
    print(f"checks.py: {scenario}: {len(jobs)} Jobs")


def check_migrations_start():
    """The default, migrations.mode=start: no Job, the processes migrate."""
    docs = load("production")
    if by_kind(docs, "Job") or any("MIGRATE_ON_START" in env_of(main_container(d)) for d in by_kind(docs, "Deployment").values()):
        fail("production", "migrations.mode=start renders a Job or sets MIGRATE_ON_START")


def check_cloud_sql():
    """cloud-sql-values.yaml: the Cloud SQL Auth Proxy as a native sidecar of every workload."""
    scenario = "cloud-sql"
    docs = load(scenario)
    for d in by_kind(docs, "Deployment").values():
        spec = d["spec"]["template"]["spec"]
        proxy = [c for c in spec.get("initContainers", []) if c["name"] == "cloud-sql-proxy"]
        if not proxy or proxy[0].get("restartPolicy") != "Always":
            fail(scenario, f"{d['metadata']['name']}: no cloud-sql-proxy sidecar (an initContainer with restartPolicy Always)")
        elif proxy[0]["securityContext"].get("capabilities") != {"drop": ["ALL"]} or proxy[0]["securityContext"].get("runAsUser") != 65532:
            fail(scenario, f"{d['metadata']['name']}: the sidecar's securityContext is not its own over the chart's: {proxy[0]['securityContext']}")
        shipper = [c for c in spec["containers"] if c["name"] == "log-shipper"]
        if not shipper or not shipper[0].get("securityContext", {}).get("readOnlyRootFilesystem"):
            fail(scenario, f"{d['metadata']['name']}: the extraContainers sidecar is missing or lacks the chart's securityContext")
    print(f"checks.py: {scenario}: sidecars")


def check_platform():
    """platform-values.yaml: what platform teams expect of a chart, each as they would look for it."""
    scenario = "platform"
    docs = load(scenario)
    deployments = {component(d): d for d in by_kind(docs, "Deployment").values()}
    for d in docs:
        if d["metadata"]["name"] != "workauto-extra" and d["metadata"].get("labels", {}).get("team") != "platform":
            fail(scenario, f"{d['kind']}/{d['metadata']['name']}: commonLabels missing")
    for c, d in deployments.items():
        pod = d["spec"]["template"]
        if pod["metadata"]["labels"].get("cost-center") != "4242":
            fail(scenario, f"{c}: commonLabels missing on the pods")
        if not main_container(d)["image"].startswith("registry.internal/ghcr.io/workauto/workauto@sha256:"):
            fail(scenario, f"{c}: image {main_container(d)['image']} is not under global.imageRegistry")
    gw = main_container(deployments["gateway"])
    if gw["livenessProbe"].get("timeoutSeconds") != 3 or gw["livenessProbe"].get("failureThreshold") != 6 or gw["livenessProbe"].get("httpGet", {}).get("path") != "/healthz":
        fail(scenario, f"gateway: livenessProbe overrides not merged over the chart's: {gw['livenessProbe']}")
    if gw["readinessProbe"].get("periodSeconds") != 3 or gw["readinessProbe"].get("httpGet", {}).get("path") != "/readyz":
        fail(scenario, f"gateway: readinessProbe overrides not merged: {gw['readinessProbe']}")
    routes = list(by_kind(docs, "HTTPRoute").values())
    gateway_service = next(s for s in by_kind(docs, "Service").values() if component(s) == "gateway" and "workauto.io/metrics" not in s["metadata"]["labels"])
    if len(routes) != 1 or routes[0]["spec"]["rules"][0]["backendRefs"][0]["name"] != gateway_service["metadata"]["name"]:
        fail(scenario, "no HTTPRoute to the gateway's Service")
    if gateway_service["spec"].get("loadBalancerSourceRanges") != ["203.0.113.0/24", "2001:db8::/32"]:
        fail(scenario, f"gateway Service: loadBalancerSourceRanges {gateway_service['spec'].get('loadBalancerSourceRanges')}")
    hpas = {component(h): h for h in by_kind(docs, "HorizontalPodAutoscaler").values()}
    scaled = {component(s): s for s in by_kind(docs, "ScaledObject").values()}
    if set(scaled) != {"webhooks", "agents"} or set(hpas) & set(scaled):
        fail(scenario, f"KEDA ScaledObjects {sorted(scaled)} (want webhooks, agents) must replace their HPAs {sorted(hpas)}")
    for c, so in scaled.items():
        query = so["spec"]["triggers"][0]["metadata"]["query"]
        for problem in promql_problems(query):
            fail(scenario, f"ScaledObject {c}: its query {problem}")
        if "workauto_jobs_waiting" not in query or "replicas" in deployments[c]["spec"]:
            fail(scenario, f"ScaledObject {c}: query {query!r}; Deployment replicas {deployments[c]['spec'].get('replicas')}")
    if hpas.get("gateway", {}).get("spec", {}).get("behavior", {}).get("scaleDown", {}).get("stabilizationWindowSeconds") != 600:
        fail(scenario, "gateway HPA: autoscaling.behavior not rendered")
    sm = next(iter(by_kind(docs, "ServiceMonitor").values()))
    if not sm["spec"]["endpoints"][0].get("relabelings") or not sm["spec"]["endpoints"][0].get("metricRelabelings"):
        fail(scenario, "ServiceMonitor: relabelings or metricRelabelings missing")
    if "workauto-extra" not in by_kind(docs, "ConfigMap"):
        fail(scenario, "extraObjects: the ConfigMap (a templated name) is missing")
    accounts = by_kind(docs, "ServiceAccount")
    gw_sa = accounts.get(deployments["gateway"]["spec"]["template"]["spec"]["serviceAccountName"], {})
    if gw_sa.get("metadata", {}).get("annotations", {}).get("eks.amazonaws.com/role-arn", "").endswith("workauto-gateway") is not True:
        fail(scenario, f"gateway ServiceAccount: its own annotations do not win: {gw_sa.get('metadata')}")
    notes = env_of(main_container(deployments["notes-tasks"]))["DATABASE_URL"]
    if notes.get("valueFrom", {}).get("secretKeyRef") != {"name": "notes-db-app", "key": "uri"}:
        fail(scenario, f"notes-tasks: DATABASE_URL is not the uri of the CloudNativePG Secret: {notes}")
    if sum(1 for e in main_container(deployments["notes-tasks"])["env"] if e["name"] == "DATABASE_URL") != 1:
        fail(scenario, "notes-tasks: DATABASE_URL given twice (the API server warns; server-side apply may drop one)")
    agents_env = env_of(main_container(deployments["agents"]))
    if agents_env.get("AGENT_PROVIDER_TIMEOUT_MS", {}).get("value") != "90000":
        fail(scenario, f"agents: a whole number renders {agents_env.get('AGENT_PROVIDER_TIMEOUT_MS')}, not 90000")
    print(f"checks.py: {scenario}: {len(deployments)} Deployments, {len(routes)} HTTPRoute, {len(scaled)} ScaledObjects")


for check in (check_platform, check_names, check_default, check_production, check_overrides, check_edge, check_cloud_sql, check_kafka_mtls, check_plain_username, check_migrations_job, check_migrations_start, check_observability):
    check()
for p in problems:
    print("chart-check: FAIL:", p)
sys.exit(1 if problems else 0)
