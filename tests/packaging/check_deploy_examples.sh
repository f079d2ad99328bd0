#!/usr/bin/env bash
# tests/packaging/check_deploy_examples.sh SOURCE_DIR BIN_DIR — the deployment files that no
# engine runs here stay consistent with the code: the Kubernetes ConfigMap's configuration passes
# `ratelimitd --check`, its probes use the documented endpoints, and packaging/Dockerfile installs
# its build dependencies from scripts/deps.sh (what building needs, not the tests' packages) and
# its runtime from the ratelimitd package, and its ENTRYPOINT/CMD make `docker run IMAGE --store …`
# append to ratelimitd's arguments: the command docker would run (ENTRYPOINT + the user's
# arguments, which replace CMD) is run here against the image's configuration (the package's,
# edited by the Dockerfile's own sed line).
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
grep -q "source scripts/deps.sh && ratelimit_install_run_deps" "$df" ||
  fail "$df does not install its build dependencies from scripts/deps.sh (ratelimit_install_run_deps)"
# scripts/run and the image install what building and running need, nothing the tests add.
grep -q '^ratelimit_install_run_deps' "$src/scripts/run" || fail "scripts/run installs more than building and running need"
bash -c 'source "$1/scripts/deps.sh"
         for p in chromium nginx caddy haproxy prometheus redis-server libgtest-dev libbenchmark-dev clang; do
           for r in "${RATELIMIT_RUN_PACKAGES[@]}"; do [ "$r" = "$p" ] && { echo "$p"; exit 1; }; done
           found=0; for t in "${RATELIMIT_TEST_PACKAGES[@]}"; do [ "$t" = "$p" ] && found=1; done
           [ $found = 1 ] || { echo "$p missing from the test list"; exit 1; }
         done' _ "$src" > "$tmp/deps.out" || fail "scripts/deps.sh: test-only package in the run list: $(cat "$tmp/deps.out")"

# docker run IMAGE ARGS... runs ENTRYPOINT + ARGS (ARGS replace CMD). Both are JSON arrays.
json_of() { sed -n "s/^$1 //p" "$df" | tail -1; }
entry=$(json_of ENTRYPOINT) cmd=$(json_of CMD)
[ -n "$entry" ] || fail "$df has no ENTRYPOINT"
python3 - "$entry" "$cmd" > "$tmp/entry" <<'PY' || fail "$df: ENTRYPOINT/CMD: $(cat "$tmp/entry")"
import json, sys
entry, cmd = json.loads(sys.argv[1]), json.loads(sys.argv[2] or "[]")
if entry[:1] != ["/usr/bin/ratelimitd"] or "--config" not in entry:
    sys.exit(f"ENTRYPOINT must run /usr/bin/ratelimitd --config …, not {entry}")
if cmd:
    sys.exit(f"CMD must be empty so that arguments after the image append (it is {cmd})")
print("\n".join(entry[1:]))
PY
# The image's configuration: the package's, with the Dockerfile's sed applied.
sed_expr=$(grep -o "sed -i '[^']*' /etc/ratelimit/ratelimit.yaml" "$df" | sed "s/^sed -i '//; s/' .*//")
[ -n "$sed_expr" ] || fail "$df no longer edits the image's listen address with sed"
sed "$sed_expr" "$src/packaging/ratelimit.yaml" > "$tmp/image.yaml"
grep -qx 'listen: 0.0.0.0:8080' "$tmp/image.yaml" || fail "the image's configuration does not listen on 0.0.0.0:8080"
mapfile -t args < "$tmp/entry"
for i in "${!args[@]}"; do [ "${args[$i]}" = /etc/ratelimit/ratelimit.yaml ] && args[$i]=$tmp/image.yaml; done
timeout 10 "$bin/ratelimitd" "${args[@]}" --store redis://127.0.0.1:6379/0 --check > "$tmp/run.out" 2>&1 ||
  fail "docker run IMAGE --store redis://… --check would fail: $(cat "$tmp/run.out")"
# The appended --store reaches ratelimitd: --connect tries exactly that (closed) address.
code=0
timeout 10 "$bin/ratelimitd" "${args[@]}" --store redis://127.0.0.1:1/0 --check --connect > "$tmp/run.out" 2>&1 || code=$?
[ "$code" = 1 ] && grep -q 'redis://127.0.0.1:1/0' "$tmp/run.out" ||
  fail "the appended --store did not reach ratelimitd (exit $code): $(cat "$tmp/run.out")"
grep -q '^FROM debian:12 AS build' "$df" && grep -q '^FROM debian:12-slim' "$df" ||
  fail "$df is not a two-stage Debian 12 build"
grep -q 'apt-get install -y --no-install-recommends /tmp/ratelimitd_\*.deb' "$df" ||
  fail "$df does not install the ratelimitd package"
echo "deployment examples consistent"
