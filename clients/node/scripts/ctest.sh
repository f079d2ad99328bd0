#!/usr/bin/env bash
# clients/node/scripts/ctest.sh SOURCE_DIR WORK_DIR — the Node client's tests as ctest runs them:
# the package is copied into WORK_DIR (the build tree; the source tree stays clean), its npm
# dependencies installed with `npm ci` from package-lock.json (again only when the lock changed),
# compiled with the pinned typescript, and node:test run against real Redis and ratelimitd.
# The environment (RATELIMIT_BIN_DIR, RATELIMIT_REDIS_LIBRARY, RATELIMIT_VECTORS_DIR,
# RATELIMIT_CONFORMANCE_DIR, RATELIMIT_TEST_REDIS_URL) comes from clients/CMakeLists.txt and
# scripts/test. Bounded: npm ci 300 s, tsc 120 s, each test file 240 s.
# Nothing outlives the run: this script, `timeout` and each `node` get SIGKILL when the process
# that started them dies (util-linux's setpriv --pdeathsig, preserved across exec), and the tests
# start redis-server and ratelimitd the same way (test/support.ts), so killing ctest, this script
# or a test process takes every server of the run with it, as a ctest timeout already does (it
# kills the process tree; a parent killed outside it, e.g. ctest itself, left the rest running).
set -euo pipefail
[ -n "${RATELIMIT_DIES_WITH_PARENT:-}" ] || RATELIMIT_DIES_WITH_PARENT=1 exec setpriv --pdeathsig KILL -- "$0" "$@"
src=$1 work=$2
mkdir -p "$work"
command -v npm >/dev/null || { echo "npm is not installed (scripts/deps.sh installs nodejs and npm when missing)" >&2; exit 1; }
cp "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$src/tsconfig.test.json" "$work/"
rm -rf "$work/src" "$work/test" "$work/scripts" "$work/dist" "$work/dist-test" "$work/library"
cp -r "$src/src" "$src/test" "$src/scripts" "$work/"
cd "$work"
stamp=node_modules/.installed-package-lock.json
if ! cmp -s package-lock.json "$stamp"; then
  timeout 300 npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi
timeout 120 node_modules/.bin/tsc -p tsconfig.json
timeout 120 node_modules/.bin/tsc -p tsconfig.test.json
# Each test file in a `node` of its own (node:test runs a file's tests in that process and exits 1
# if any failed), not under `node --test`, whose runner forks a process per file that nothing
# ties to it: a killed runner left its test files, and their servers, running.
status=0
for f in dist-test/test/*.test.js; do
  echo "# $f"
  setpriv --pdeathsig KILL -- timeout 240 setpriv --pdeathsig KILL -- node "$f" || status=1
done
exit $status
