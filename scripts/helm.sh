#!/usr/bin/env bash
# Runs helm, building it once from the Go module proxy (no helm binary ships in npm or Debian).
# The binary is cached under .cache/helm. Usage: scripts/helm.sh <helm args…>
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.cache/helm/bin/helm"
if [ ! -x "$bin" ]; then
  echo "building helm v3.17.3 from the Go module proxy (once, about a minute)…" >&2
  GOBIN="$root/.cache/helm/bin" GOFLAGS=-mod=mod go install helm.sh/helm/v3/cmd/helm@v3.17.3
fi
exec "$bin" "$@"
