#!/usr/bin/env bash
# Property-based fuzzing of the whole REST API from its own OpenAPI document (not part of make test):
# starts the product like make dev on a throwaway data folder, then runs schemathesis with the
# check that no generated request — valid or not — gets a 5xx.
#   scripts/fuzz-api.sh [max examples per operation, default 25]
# Needs schemathesis (pip install schemathesis) and a build (make build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$root/node_modules/.bin:$PATH"
command -v st >/dev/null || { echo "fuzz: schemathesis is not installed; run: pip install schemathesis" >&2; exit 1; }
data=$(mktemp -d); chmod 755 "$data"; port=$((20000 + RANDOM % 20000))
cd "$root"
DATA_DIR="$data" PORT="$port" LOG_LEVEL=warn RATE_LIMIT_PER_MINUTE=1000000 node deploy/embedded/dist/main.js >"$data/dev.log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 600); do curl -sf "localhost:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
key=$(node -e "console.log(JSON.parse(require('fs').readFileSync('$data/dev-credentials.json','utf8')).owner_api_key)")
# Tenant bootstrap needs the platform token and OAuth a provider: both are tested end to end instead.
st run "http://127.0.0.1:$port/api/v1/openapi.json" -H "Authorization: Bearer $key" \
  --checks not_a_server_error --max-examples "${1:-25}" --exclude-path-regex '/admin/|/oauth/'
