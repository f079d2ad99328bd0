# scripts/deps.sh — the one list of Debian packages this project needs, and an idempotent
# installer. Sourced by scripts/test and scripts/run. Fast and silent when all are present.
RATELIMIT_PACKAGES=(
  g++ cmake make ccache pkg-config python3 dpkg-dev systemd
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost1.81-dev libboost-json1.81-dev
  libhiredis-dev libssl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libsystemd-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc  # proto/, src/grpc
  python3-grpcio  # tests/rls/envoy_serve_e2e.py calls ShouldRateLimit over real gRPC
  redis-server redis-tools redis-sentinel openssl
  prometheus  # promtool checks the /metrics text (tests/rls/envoy_serve_e2e.py)
  nginx caddy haproxy   # tests/proxies: the reverse-proxy end-to-end tests
  clang libclang-rt-14-dev
  chromium  # tests/sim/chart_pixels.py renders the simulator's charts headless
)
# The peers of the benchmarks (bench/peers, docs/BENCHMARKS.md): not needed to build or test.
# bench/peers/lib.sh installs them with `ratelimit_install_deps "${RATELIMIT_BENCH_PACKAGES[@]}"`;
# the npm packages are pinned by bench/peers/node/package-lock.json. Node itself (Debian's
# nodejs + npm) is installed only when no `npm` command exists, because a Node from elsewhere
# (e.g. one that bundles npm) conflicts with Debian's npm package.
RATELIMIT_BENCH_PACKAGES=(nginx wrk curl python3-limits python3-redis redis-server redis-tools
  nghttp2-client)  # h2load: tools/bench/rls_vs_http.sh's second gRPC client
RATELIMIT_BENCH_NODE_PACKAGES=(nodejs npm)

ratelimit_install_deps() {
  local missing=() p
  for p in "${RATELIMIT_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
