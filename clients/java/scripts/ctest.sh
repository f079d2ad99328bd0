#!/usr/bin/env bash
# clients/java/scripts/ctest.sh SOURCE_DIR WORK_DIR — the Java client's test as ctest runs it:
# javac (-Werror) against Debian's jars in /usr/share/java (Jetty 9, the Servlet API; nothing
# from Maven Central) into WORK_DIR, then RateLimitFilterTest (Jetty 9 + the filter + a real
# ratelimitd on real Redis). Bounded: javac 180 s, the test 180 s.
# Nothing outlives the run: this script, `timeout` and `java` get SIGKILL when the process that
# started them dies (util-linux's setpriv --pdeathsig, preserved across exec), and the test starts
# redis-server and ratelimitd the same way (RateLimitFilterTest.start), so killing ctest, this
# script or the JVM takes every server of the run with it.
set -euo pipefail
[ -n "${RATELIMIT_DIES_WITH_PARENT:-}" ] || RATELIMIT_DIES_WITH_PARENT=1 exec setpriv --pdeathsig KILL -- "$0" "$@"
src=$1 work=$2
cp=""
for jar in jetty9-server jetty9-servlet jetty9-http jetty9-io jetty9-util jetty9-security servlet-api; do
  [ -f "/usr/share/java/$jar.jar" ] || { echo "missing /usr/share/java/$jar.jar (scripts/deps.sh installs libjetty9-java libservlet-api-java)" >&2; exit 1; }
  cp="$cp:/usr/share/java/$jar.jar"
done
rm -rf "$work/classes"
mkdir -p "$work/classes"
timeout 180 javac -Xlint:all -Werror -d "$work/classes" -cp "${cp#:}" $(find "$src/src" -name '*.java')
setpriv --pdeathsig KILL -- timeout 180 setpriv --pdeathsig KILL -- java -cp "$work/classes$cp" dev.ratelimit.client.RateLimitFilterTest
