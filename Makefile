# Every target runs on the Node 24 that package.json pins (node_modules/.bin comes first on PATH).
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

TEST_DIRS := libs/*/dist services/*/dist deploy/embedded/dist
# The files that take a minute or more (outages, rollouts, a killed replica) start first, so the
# suite does not end waiting on one of them while the other lanes are idle; the rest follow by name.
TEST_FIRST := deploy/embedded/dist/e2e/outage.test.js deploy/embedded/dist/e2e/faults.test.js \
  deploy/embedded/dist/e2e/audit-outage.test.js deploy/embedded/dist/e2e/identity.test.js \
  libs/events/dist/events.test.js deploy/embedded/dist/e2e/openapi-required.test.js \
  services/webhooks/dist/crash.test.js libs/service/dist/startup.test.js
# Timed against its own quiet moments, so it runs alone after the rest (five files at once, the Kafka
# 4.x run and lint beside them, load a 2-core machine enough to move a p99 by hundreds of ms).
TEST_ALONE := deploy/embedded/dist/e2e/noisy-neighbour.test.js
# Shared by every `make test` of this machine (any clone): suites hold it shared, TEST_ALONE exclusive.
TEST_LOCK := $${TMPDIR:-/tmp}/workauto-make-test.lock
# Run again on the current Kafka 4.x line, beside the suite (on 3.9): the event library's tests (the
# transport, the outbox relay, consumers, dead letters, TLS, SASL and mTLS listeners) and the audit
# log end to end through Kafka.
KAFKA_4_TESTS := libs/events/dist/events.test.js libs/events/dist/kafka-security.test.js deploy/embedded/dist/e2e/audit.test.js

.PHONY: dev test build proto proto-lint proto-breaking lint lint-code format bench clean install chart-check chart-install migrations-check openapi-lint

# Tools the checks build or download once (helm, kube-apiserver, the previous release, Kafka jars…) live
# in .cache/, a link to one folder per user, so a fresh clone (CI) reuses what an earlier clone built.
CACHE_HOME ?= $(HOME)/.cache/workauto

## install: npm packages (Node 24 itself comes as the npm package `node`), and the tool cache
install: node_modules/.installed .cache
.cache:
	mkdir -p "$(CACHE_HOME)" && ln -sfn "$(CACHE_HOME)" .cache
# npm ci: exactly the lockfile. (The lockfile lists buf's macOS/Windows binaries without integrity
# hashes: the registry mirror of the build machines does not serve them, and npm ci refuses a
# lockfile that lacks them; they are never installed on Linux.)
# A host Node older than 24 makes npm ci warn EBADENGINE, five lines for each package that asks for a
# newer Node (190 lines on Node 20): harmless, every later step runs on the Node 24 npm ci installs
# (node_modules/.bin comes first on PATH), so they are folded into one line that says so.
node_modules/.installed: package.json package-lock.json
	@host=$$(node --version 2>/dev/null); echo "npm ci --no-audit --no-fund"; set -o pipefail; \
	npm ci --no-audit --no-fund 2>&1 | awk -v host="$$host" \
	  '/^npm warn EBADENGINE Unsupported engine/ { n++ } /^npm warn EBADENGINE/ { next } { print } \
	   END { if (n) printf "npm ci: %d packages ask for a newer Node than this host'"'"'s %s (EBADENGINE warnings, not shown); harmless: make runs everything on the Node 24 npm ci installed (node_modules/.bin/node)\n", n, host }'
	@touch $@

## proto: TypeScript from proto/ with buf + ts-proto, and the descriptor sets (with source comments) that
## the gateway, event data and reflection read at run time; the test fixtures' too (nothing here is committed).
## Only when a proto, buf's configuration or the installed packages changed: an unchanged checkout skips it
PROTO_STAMP := libs/protos/src/gen/.generated
proto: $(PROTO_STAMP)
$(PROTO_STAMP): $(shell find proto libs/protos/test-protos -name '*.proto') buf.yaml buf.gen.yaml node_modules/.installed | .cache
	rm -rf libs/protos/src/gen
	buf generate
	buf build proto -o libs/protos/descriptor.binpb
	buf build libs/protos/test-protos -o libs/protos/fixtures.binpb
	@touch $@

## build: protos, the gateway, the OpenAPI document it serves (libs/client/openapi.json, rewritten only when it
## changed) and the typed client's types generated from it (only then), then every workspace with tsc -b
## (strict, incremental): a document that breaks a client call fails here. An unchanged checkout takes seconds
build: proto
	tsc -b services/gateway
	node services/gateway/dist/write-openapi.js libs/client/openapi.json
	@$(MAKE) --no-print-directory -s libs/client/src/gen/openapi.ts
	tsc -b tsconfig.json

libs/client/src/gen/openapi.ts: libs/client/openapi.json libs/client/scripts/generate.mjs node_modules/.installed
	@echo "node libs/client/scripts/generate.mjs libs/client/openapi.json $@"
	@node libs/client/scripts/generate.mjs libs/client/openapi.json $@

## openapi-lint: redocly lint, recommended rules (redocly.yaml), over the document the gateway serves, then the
## generators users run (openapi-python-client, openapi-typescript, oapi-codegen; scripts/openapi-clients.mjs,
## installed once into .cache/): any error or warning, or an operation a generator leaves out, fails
openapi-lint: build
	@out=$$(redocly lint --max-problems 1000 libs/client/openapi.json 2>&1); status=$$?; echo "$$out"; \
	if [ $$status -ne 0 ] || grep -q 'warning' <<< "$$out"; then \
	  echo 'openapi-lint: redocly reported the problems above; fix them in services/gateway/src/openapi.ts or in the protos'"'"' comments and annotations'; exit 1; fi
	node scripts/openapi-clients.mjs check libs/client/openapi.json

## dev: the whole product on this machine (embedded PostgreSQL, all services, gateway on PORT)
dev: build
	node deploy/embedded/dist/main.js

## test: the migration checks, the previous release built for the upgrade test (once per commit, cached),
## then the whole suite against real PostgreSQL and a real Kafka 3.9 broker (started and stopped here),
## five files at once, with lint-code, the chart checks (offline and on a real API server) and the Kafka
## tests on a Kafka 4.x broker (KAFKA_4_TESTS) beside it; then TEST_ALONE on a quiet machine: it measures
## one tenant's latency under another's attack, so it waits (TEST_LOCK, exclusive) until no other
## `make test` on this machine is in its suite (which holds TEST_LOCK shared), at most 30 minutes
## Every node process of the suite (the test files, the services they start, the linters) reads V8's
## code cache of the modules it loads instead of compiling them again: loading the whole product
## took 1.4 s of CPU, 1.16 s with it (docs/testing.md). Kept in node_modules: one per clone.
test: export NODE_COMPILE_CACHE := $(CURDIR)/node_modules/.cache/node-compile
test: build openapi-lint migrations-check
	@lint_log=$$(mktemp); flock -s $(TEST_LOCK) $(MAKE) --no-print-directory lint-code > "$$lint_log" 2>&1 & lint=$$!; \
	charts_log=$$(mktemp); flock -s $(TEST_LOCK) $(MAKE) --no-print-directory chart-check chart-install > "$$charts_log" 2>&1 & charts=$$!; \
	kafka4_log=$$(mktemp); \
	KAFKA_LINE=4 flock -s $(TEST_LOCK) node deploy/embedded/dist/with-infra.js -- node --test --test-concurrency=1 --test-timeout=180000 \
	  --test-reporter=spec $(KAFKA_4_TESTS) > "$$kafka4_log" 2>&1 & kafka4=$$!; \
	.ci/previous-release.sh > /dev/null && \
	flock -s $(TEST_LOCK) node deploy/embedded/dist/with-infra.js -- node --test --test-concurrency=5 --test-timeout=180000 \
	  $(TEST_FIRST) $$(find $(TEST_DIRS) -name '*.test.js' ! -path '$(TEST_ALONE)' | sort | grep -vxF $(patsubst %,-e %,$(TEST_FIRST))); \
	status=$$?; \
	if wait $$kafka4; then echo "Kafka 4.x: $$(grep -E '^ℹ (tests|pass|fail) ' "$$kafka4_log" | tr '\n' ' ')"; \
	else cat "$$kafka4_log"; echo 'the Kafka tests on Kafka 4.x failed (above): KAFKA_LINE=4 node deploy/embedded/dist/with-infra.js -- node --test <file>'; status=1; fi; \
	if wait $$lint; then echo 'lint-code: Prettier, eslint, knip and the scripts imports check found nothing'; \
	else cat "$$lint_log"; echo 'lint-code failed: the findings are above (make lint-code)'; status=1; fi; \
	wait $$charts; charts_status=$$?; cat "$$charts_log"; \
	if [ $$charts_status -ne 0 ]; then echo 'the chart checks failed (above): make chart-check chart-install'; status=1; fi; \
	flock -x -w 1800 $(TEST_LOCK) node deploy/embedded/dist/with-infra.js -- node --test --test-timeout=300000 $(TEST_ALONE) \
	  || { status=1; echo "$(TEST_ALONE) failed, or another make test held $(TEST_LOCK) for 30 minutes"; }; \
	rm -f "$$lint_log" "$$kafka4_log" "$$charts_log"; exit $$status

proto-lint: install
	buf lint

## proto-breaking: fails when proto/ breaks wire or source compatibility with main (the whole workspace:
## main's checkout has two modules, proto/ and the test fixtures, which buf compares module by module)
proto-breaking: install
	buf breaking --against '.git#branch=main'

## lint: buf lint, the chart and migration checks, and lint-code
lint: proto-lint build chart-check migrations-check lint-code

## lint-code: Prettier, eslint with type information (eslint.config.js), knip (knip.jsonc: unused files,
## exports, dependencies) and the scripts' imports (.ci/script-imports.mjs: every name a script imports
## exists). Run it after make build (eslint and the imports check read the workspaces' .d.ts); make test
## runs it beside the suite
lint-code:
	prettier --check --log-level warn .
	eslint .
	knip
	node .ci/script-imports.mjs

## format: Prettier over the tree (.prettierrc.json: 120 columns)
format: install
	prettier --write --log-level warn .

## chart-check: helm lint --strict, renders validated by kubeconform and the restricted Pod Security
## level, the schema's refusals (.ci/chart-check.sh; its tools are built once into .cache/)
chart-check:
	.ci/chart-check.sh

## chart-install: the chart installed, upgraded from the previous release (.ci/previous-release) and uninstalled
## on a real kube-apiserver with etcd, on loopback, admission on (.ci/kube-install.sh; built once into .cache/kube)
chart-install:
	.ci/kube-install.sh

## migrations-check: squawk and the expand/contract rules over every migration, against the previous
## release (.ci/previous-release; .ci/migrations-check.sh, docs/operations.md "Upgrades")
migrations-check: install
	.ci/migrations-check.sh

## bench: every scripts/bench-*.mjs (each with its own PostgreSQL and Kafka), then one table of the figures with their targets (docs/benchmarks.md)
bench: build
	@node scripts/bench-table.mjs

clean:
	rm -rf libs/*/dist services/*/dist deploy/embedded/dist libs/protos/src/gen libs/protos/*.binpb **/*.tsbuildinfo libs/client/src/gen libs/client/openapi.json
