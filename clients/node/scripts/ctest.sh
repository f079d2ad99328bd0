#!/usr/bin/env bash
# clients/node/scripts/ctest.sh SOURCE_DIR WORK_DIR — the Node client's tests as ctest runs them:
# the package is copied into WORK_DIR (the build tree; the source tree stays clean), its npm
# dependencies installed with `npm ci` from package-lock.json (again only when the lock changed),
# compiled with the pinned typescript, and node:test run against real Redis and ratelimitd.
# The environment (RATELIMIT_BIN_DIR, RATELIMIT_REDIS_LIBRARY, RATELIMIT_VECTORS_DIR,
# RATELIMIT_CONFORMANCE_DIR, RATELIMIT_TEST_REDIS_URL) comes from clients/CMakeLists.txt and
# scripts/test. Bounded: npm ci 300 s, tsc 120 s, the tests 240 s.
set -euo pipefail
src=$1 work=$2
mkdir -p "$work"
command -v npm >/dev/null || { echo "npm is not installed (scripts/deps.sh installs nodejs and npm when missing)" >&2; exit 1; }
cp "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$src/tsconfig.test.json" "$work/"
rm -rf "$work/src" "$work/test" "$work/dist" "$work/dist-test"
cp -r "$src/src" "$src/test" "$work/"
cd "$work"
stamp=node_modules/.installed-package-lock.json
if ! cmp -s package-lock.json "$stamp"; then
  timeout 300 npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi
timeout 120 node_modules/.bin/tsc -p tsconfig.json
timeout 120 node_modules/.bin/tsc -p tsconfig.test.json
timeout 240 node --test --test-concurrency=1 dist-test/test/
