#!/usr/bin/env bash
# tests/packaging/check_deploy_examples.sh SOURCE_DIR BIN_DIR — the deployment files that no
# engine runs here stay consistent with the code: the Kubernetes ConfigMap's configuration passes
# `ratelimitd --check`, its probes use the documented endpoints, and packaging/Dockerfile installs
# its build dependencies from scripts/deps.sh and its runtime from the ratelimitd package.
set -euo pipefail
src=$1 bin=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

k8s=$src/examples/kubernetes/ratelimitd.yaml
# The block scalar under "ratelimit.yaml: |", indented 4 spaces, up to the next document.
awk '/^  ratelimit.yaml: \|$/ {on=1; next} /^---/ {on=0} on {sub(/^    /, ""); print}' "$k8s" \
  > "$tmp/ratelimit.yaml"
[ -s "$tmp/ratelimit.yaml" ] || fail "no ratelimit.yaml block in $k8s"
timeout 10 "$bin/ratelimitd" --config "$tmp/ratelimit.yaml" --check ||
  fail "the ConfigMap's configuration does not pass --check"
grep -q 'path: /readyz' "$k8s" || fail "$k8s: no readiness probe on /readyz"
grep -q 'path: /healthz' "$k8s" || fail "$k8s: no liveness probe on /healthz"

df=$src/packaging/Dockerfile
grep -q "source scripts/deps.sh && ratelimit_install_deps" "$df" ||
  fail "$df does not install its build dependencies from scripts/deps.sh"
grep -q '^FROM debian:12 AS build' "$df" && grep -q '^FROM debian:12-slim' "$df" ||
  fail "$df is not a two-stage Debian 12 build"
grep -q 'apt-get install -y --no-install-recommends /tmp/ratelimitd_\*.deb' "$df" ||
  fail "$df does not install the ratelimitd package"
echo "deployment examples consistent"
