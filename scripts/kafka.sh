#!/usr/bin/env bash
# A real single-node Kafka (KRaft) broker on loopback for tests and local runs.
#   scripts/kafka.sh start   → prints KAFKA_BROKERS=127.0.0.1:<port> as its last line once ready
#   scripts/kafka.sh stop
#   scripts/kafka.sh halt | resume   → stop the process keeping data and port, start it again (outage tests)
#   KAFKA_SECURE_KEYSTORE=<pem file: private key (PKCS#8, unencrypted) + certificate> adds a SASL_SSL
#   listener (SCRAM-SHA-256 user `workauto` with password $KAFKA_SCRAM_PASSWORD, and unsecured-JWT
#   OAUTHBEARER) and prints KAFKA_SECURE_BROKERS=127.0.0.1:<port> before the last line.
#   With it, KAFKA_CLIENT_CA=<pem file: CA certificate(s)> adds an SSL listener that requires a client
#   certificate signed by that CA (ssl.client.auth=required, as Strimzi's tls authentication) and
#   prints KAFKA_MTLS_BROKERS=127.0.0.1:<port>.
# KAFKA_LINE=4 runs the current 4.x line (deploy/kafka/kafka-4.pom.xml) instead of 3.9 (the default).
# Jars come from Maven Central (deploy/kafka/pom.xml) and are cached under .cache/kafka/jars(-4).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/kafka"
case "${KAFKA_LINE:-3}" in
  3) jars="$cache/jars" pom="$root/deploy/kafka/pom.xml" ;;
  4) jars="$cache/jars-4" pom="$root/deploy/kafka/kafka-4.pom.xml" ;;
  *) echo "kafka: KAFKA_LINE must be 3 or 4 (got ${KAFKA_LINE})" >&2; exit 2 ;;
esac
# One run directory per broker: KAFKA_RUN_DIR lets runs side by side (two test runs) keep apart.
run="${KAFKA_RUN_DIR:-$cache/run}"
log() { echo "kafka: $*" >&2; }

free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

fetch_jars() {
  if ls "$jars"/kafka_2.13-*.jar >/dev/null 2>&1; then return; fi
  log "downloading the Apache Kafka ${KAFKA_LINE:-3}.x jars from Maven Central (once; cached in .cache/kafka)…"
  mkdir -p "$jars"
  mvn -B -q -f "$pom" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$jars" >&2 || { log "mvn could not fetch the jars; check that Maven Central is reachable"; rm -rf "$jars"; exit 1; }
}

# Free ports are picked, then bound by the broker a moment later: on a busy machine another process
# may take one in between, so a start that fails on a port in use is tried again with new ports.
start() {
  local attempt
  for attempt in 1 2 3; do
    start_once && return 0
    grep -q "Address already in use" "$run/server.log" 2>/dev/null || exit 1
    log "a port was taken before the broker bound it; trying again with new ports ($attempt/3)"
  done
  exit 1
}

start_once() {
  command -v java >/dev/null || { log "java (17+) is not installed; install a JDK 17"; exit 1; }
  stop_quietly
  fetch_jars
  mkdir -p "$run"
  local port cport sport="" mport=""
  port=$(free_port); cport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  local listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport" advertised="PLAINTEXT://127.0.0.1:$port" map="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  local format_extra=()
  if [ -n "${KAFKA_SECURE_KEYSTORE:-}" ]; then
    sport=$(free_port)
    while [ "$sport" = "$port" ] || [ "$sport" = "$cport" ]; do sport=$(free_port); done
    listeners="$listeners,SASL_SSL://127.0.0.1:$sport"; advertised="$advertised,SASL_SSL://127.0.0.1:$sport"; map="$map,SASL_SSL:SASL_SSL"
    format_extra=(--add-scram "SCRAM-SHA-256=[name=workauto,password=${KAFKA_SCRAM_PASSWORD:?KAFKA_SCRAM_PASSWORD is required with KAFKA_SECURE_KEYSTORE}]")
    if [ -n "${KAFKA_CLIENT_CA:-}" ]; then
      mport=$(free_port)
      while [ "$mport" = "$port" ] || [ "$mport" = "$cport" ] || [ "$mport" = "$sport" ]; do mport=$(free_port); done
      listeners="$listeners,MTLS://127.0.0.1:$mport"; advertised="$advertised,MTLS://127.0.0.1:$mport"; map="$map,MTLS:SSL"
    fi
  fi
  # Request threads sized to the machine: the defaults (8 I/O and 3 network threads) are a many-core
  # server's; on two cores the extra threads only add hand-offs between them (the API mix's broker
  # CPU per request 12 % lower with 2 and 1; docs/benchmarks.md).
  local cores; cores=$(nproc 2>/dev/null || echo 2)
  cat > "$run/server.properties" <<PROPS
num.io.threads=$(( cores < 8 ? cores : 8 ))
num.network.threads=$(( cores < 6 ? 1 : 3 ))
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$advertised
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=$map
log.dirs=$run/data
num.partitions=3
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPS
  if [ -n "$sport" ]; then
    cat >> "$run/server.properties" <<PROPS
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$KAFKA_SECURE_KEYSTORE
PROPS
  fi
  if [ -n "$mport" ]; then
    cat >> "$run/server.properties" <<PROPS
listener.name.mtls.ssl.keystore.type=PEM
listener.name.mtls.ssl.keystore.location=$KAFKA_SECURE_KEYSTORE
listener.name.mtls.ssl.client.auth=required
listener.name.mtls.ssl.truststore.type=PEM
listener.name.mtls.ssl.truststore.location=$KAFKA_CLIENT_CA
PROPS
  fi
  # Kafka 3 logs through log4j 1 (reload4j), Kafka 4 through log4j 2: the same lines to server.log.
  cat > "$run/log4j2.properties" <<'PROPS'
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.server.name = kafka.server.KafkaServer
logger.server.level = INFO
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
PROPS
  cat > "$run/log4j.properties" <<'PROPS'
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.server.KafkaRaftServer=INFO
PROPS
  local jvm=(-Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dkafka.logs.dir="$run" -Dlog4j.configuration="file:$run/log4j.properties" -Dlog4j2.configurationFile="$run/log4j2.properties")
  java "${jvm[@]}" -cp "$jars/*" kafka.tools.StorageTool format -t "$(java -cp "$jars/*" kafka.tools.StorageTool random-uuid 2>/dev/null)" \
    -c "$run/server.properties" --ignore-formatted "${format_extra[@]}" >"$run/format.log" 2>&1 || { log "formatting storage failed; see $run/format.log"; exit 1; }
  echo "$port" > "$run/port"
  if [ -n "$sport" ]; then echo "$sport" > "$run/secure-port"; fi
  if [ -n "$mport" ]; then echo "$mport" > "$run/mtls-port"; fi
  launch
}

# Runs the broker of $run (already formatted) and waits until it serves.
launch() {
  local port; port=$(cat "$run/port")
  local jvm=(-Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dkafka.logs.dir="$run" -Dlog4j.configuration="file:$run/log4j.properties" -Dlog4j2.configurationFile="$run/log4j2.properties")
  : > "$run/server.log"
  nohup java "${jvm[@]}" -cp "$jars/*" kafka.Kafka "$run/server.properties" >"$run/stdout.log" 2>&1 &
  echo $! > "$run/pid"
  log "broker starting on 127.0.0.1:$port (pid $(cat "$run/pid"), log $run/server.log)…"
  for _ in $(seq 1 120); do
    if ! kill -0 "$(cat "$run/pid")" 2>/dev/null; then log "the broker exited; see $run/stdout.log and $run/server.log"; return 1; fi
    if grep -q "Kafka Server started\|\[KafkaRaftServer nodeId=1\] Kafka Server started" "$run/server.log" 2>/dev/null; then
      if [ -f "$run/secure-port" ]; then echo "KAFKA_SECURE_BROKERS=127.0.0.1:$(cat "$run/secure-port")"; fi
      if [ -f "$run/mtls-port" ]; then echo "KAFKA_MTLS_BROKERS=127.0.0.1:$(cat "$run/mtls-port")"; fi
      echo "KAFKA_BROKERS=127.0.0.1:$port"
      return 0
    fi
    sleep 0.5
  done
  log "the broker did not start within 60 s; see $run/server.log"
  halt
  return 1
}

# Stops the broker process and keeps its data and ports (tests of outages: `resume` brings it back).
halt() {
  if [ -f "$run/pid" ]; then
    local pid; pid=$(cat "$run/pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
}

stop_quietly() {
  halt
  rm -rf "$run"
}

case "${1:-}" in
  start) start ;;
  stop) stop_quietly; log "stopped" ;;
  halt) halt; log "halted (data kept; 'resume' starts it again on the same port)" ;;
  resume) [ -f "$run/port" ] || { log "no halted broker in $run; use start"; exit 1; }; launch || exit 1 ;;
  *) echo "usage: $0 start|stop|halt|resume" >&2; exit 2 ;;
esac
