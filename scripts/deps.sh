# scripts/deps.sh — the one place that lists the Debian packages this project needs (to build
# and run; to test; for the benchmarks' peers), and an idempotent installer.
# Sourced by scripts/test and scripts/run. Fast and silent when all are present.
# What building and running need: scripts/run installs only these (and configures without the
# tests and benchmarks), so starting the service never waits for browsers or proxies.
RATELIMIT_RUN_PACKAGES=(
  g++ cmake make ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev
  libhiredis-dev libssl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libsystemd-dev
  libprotobuf-dev protobuf-compiler  # proto/ (the messages src/grpc serves)
  libnghttp2-dev  # src/h2: ratelimitd's HTTP/2 (gRPC, h2c)
  libgrpc++-dev protobuf-compiler-grpc  # proto/'s client stubs (the tests, ratelimit-bench); ratelimitd does not link it
)
# What the tests add (scripts/test installs both lists).
RATELIMIT_TEST_PACKAGES=(
  python3 dpkg-dev systemd fakeroot  # fakeroot: tests/packaging installs the .debs into a scratch root
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio  # tests/rls/envoy_serve_e2e.py calls ShouldRateLimit over real gRPC
  redis-server redis-tools redis-sentinel openssl
  prometheus  # promtool: the /metrics text, and the alert rules of examples/monitoring
  nginx caddy haproxy   # tests/proxies: the reverse-proxy end-to-end tests
  clang libclang-rt-14-dev
  chromium  # tests/sim/chart_pixels.py renders the simulator's charts headless
  curl iproute2 python3-yaml  # tests/docs: the docs' commands (curl), a private loopback (ip), YAML blocks
  # clients/ (ctest label clients): clients/python's redis-py and frameworks, clients/go's Go
  # and Debian's redigo (GOPATH and module mode, offline) (Node comes from scripts/test when no npm exists;
  # clients/node's npm packages from its package-lock.json)
  python3-redis python3-fastapi python3-starlette python3-uvicorn python3-flask python3-httpx
  python3-setuptools  # clients/python: setup.py's build step that bundles the function library (its test)
  python3-venv python3-wheel  # clients/README.md (docs test): pip install ./clients/python offline in a venv
  golang-go golang-github-gomodule-redigo-dev
  default-jdk-headless libjetty9-java libservlet-api-java  # clients/java: javac, Jetty 9, Servlet API
  libtomcat10-java  # clients/java: the Jakarta Servlet API and embedded Tomcat 10 (JakartaFilterTest)
  maven maven-debian-helper  # clients/java: mvn -o with Debian's repository (pom.xml's plugins)
  strace  # tests/server/signal_at_listen_e2e.py holds ratelimitd's first listen() to widen a race
  util-linux  # setpriv --pdeathsig: the client tests' servers die with them (Essential in Debian)
)
RATELIMIT_PACKAGES=("${RATELIMIT_RUN_PACKAGES[@]}" "${RATELIMIT_TEST_PACKAGES[@]}")
# The peers of the benchmarks (bench/peers, docs/BENCHMARKS.md): not needed to build or test.
# bench/peers/lib.sh installs them with `ratelimit_install_deps "${RATELIMIT_BENCH_PACKAGES[@]}"`;
# the npm packages are pinned by bench/peers/node/package-lock.json. Node itself (Debian's
# nodejs + npm) is installed only when no `npm` command exists, because a Node from elsewhere
# (e.g. one that bundles npm) conflicts with Debian's npm package.
RATELIMIT_BENCH_PACKAGES=(nginx wrk curl python3-limits python3-redis redis-server redis-tools
  python3-hiredis  # redis-py's C reply parser, for both sides of bench/clients/python_vs_limits.sh
  nghttp2-client  # h2load: tools/bench/rls_vs_http.sh's gRPC and h2c client
  golang-go golang-google-grpc-dev)  # bench/peers/grpcgo: the grpc-go floor peer (GOPATH mode)
RATELIMIT_BENCH_NODE_PACKAGES=(nodejs npm)

# ratelimit_install_deps [PACKAGE...]: installs every package of both lists, plus the arguments.
# ratelimit_install_run_deps [PACKAGE...]: only what building and running need, plus the
# arguments (scripts/run; the Dockerfile adds dpkg-dev for its packages).
ratelimit_install_run_deps() {
  local RATELIMIT_TEST_PACKAGES=()  # dynamic scope: ratelimit_install_deps sees this empty list
  ratelimit_install_deps "$@"
}

ratelimit_install_deps() {
  local missing=() p
  for p in "${RATELIMIT_RUN_PACKAGES[@]}" "${RATELIMIT_TEST_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
