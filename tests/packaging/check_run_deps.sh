#!/usr/bin/env bash
# tests/packaging/check_run_deps.sh SOURCE_DIR WORK_DIR — scripts/run installs only what building
# and running need (scripts/deps.sh: RATELIMIT_RUN_PACKAGES) and configures without the tests and
# benchmarks; this checks that such a configuration really needs nothing the test list adds:
# CMake is run with scripts/run's options and the test-only CMake packages (GoogleTest, Google
# Benchmark) made unfindable, and must produce a build with the ratelimitd target.
set -euo pipefail
src=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
opts=$(sed -n 's/^cmake --preset default \(.*\) >\/dev\/null$/\1/p' "$src/scripts/run")
[ -n "$opts" ] || fail "scripts/run no longer configures with 'cmake --preset default <options>'"
grep -q -- '-DRATELIMIT_BUILD_TESTS=OFF' <<< "$opts" || fail "scripts/run builds the tests: $opts"
grep -q -- '-DRATELIMIT_BUILD_BENCH=OFF' <<< "$opts" || fail "scripts/run builds the benchmarks: $opts"
# shellcheck disable=SC2086 # the options are words
timeout 300 cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo $opts \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "configure with scripts/run's options and no test packages"; }
timeout 60 cmake --build "$work/build" --target help | grep -q '\bratelimitd\b' ||
  fail "the configuration has no ratelimitd target"
rm -rf "$work"
echo "scripts/run's configuration needs no test package"
