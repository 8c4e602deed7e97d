#!/usr/bin/env bash
# make migrations-check (part of make test and make lint): the rules' own tests, then every
# migration against squawk and the expand/contract rules (.ci/migrations-check.mjs says which).
# squawk and libpg-query are npm devDependencies: nothing to download here.
set -euo pipefail
cd "$(dirname "$0")/.."
node --test --test-reporter=dot .ci/migrations-check.test.mjs
node .ci/migrations-check.mjs
