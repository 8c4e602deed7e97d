#!/usr/bin/env bash
# Prints the folder of the previous release (.ci/previous-release), built: its tree from git
# (git archive, no worktree), npm ci and make build, once per commit into
# .cache/previous-release/<commit>. The upgrade test (deploy/embedded/src/e2e/upgrade.test.ts) runs
# its services from there; make test calls this first, so the suite never waits for the build.
# Builds of other commits are removed (one is ~600 MB with its node_modules).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
ref="$(grep -v '^\s*#' .ci/previous-release | grep -m1 -v '^\s*$' | tr -d '[:space:]')"
if ! sha="$(git rev-parse --verify --quiet "$ref^{commit}")"; then
  echo "previous-release: $ref (.ci/previous-release) is not in this clone: fetch it (git fetch --unshallow, or git fetch origin $ref)" >&2
  exit 1
fi
cache="$root/.cache/previous-release"
dir="$cache/$sha"
if [ -f "$dir/.built" ]; then
  echo "$dir"
  exit 0
fi
started=$SECONDS
echo "previous-release: building ${sha:0:12} once into .cache/previous-release (npm ci, make build)…" >&2
tmp="$cache/.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp" && mkdir -p "$tmp"
git archive "$sha" | tar -x -C "$tmp"
# Its own Makefile and lockfile: exactly what was released. Its output goes to stderr, so the
# caller reads only the folder on stdout.
if ! (cd "$tmp" && PATH="$tmp/node_modules/.bin:$PATH" make build) >&2; then
  echo "previous-release: the build of ${sha:0:12} failed (above); check .ci/previous-release names a release of main" >&2
  exit 1
fi
touch "$tmp/.built"
find "$cache" -mindepth 1 -maxdepth 1 -not -name ".tmp.*" -exec rm -rf {} +
mv "$tmp" "$dir"
echo "previous-release: built ${sha:0:12} in $((SECONDS - started)) s" >&2
echo "$dir"
