#!/usr/bin/env bash
# clients/java/scripts/ctest.sh SOURCE_DIR WORK_DIR — the Java client's test as ctest runs it:
# javac (-Werror) against Debian's jars in /usr/share/java (Jetty 9, the Servlet API; nothing
# from Maven Central) into WORK_DIR, then RateLimitFilterTest (Jetty 9 + the filter + a real
# ratelimitd on real Redis). Bounded: javac 180 s, the test 180 s.
set -euo pipefail
src=$1 work=$2
cp=""
for jar in jetty9-server jetty9-servlet jetty9-http jetty9-io jetty9-util jetty9-security servlet-api; do
  [ -f "/usr/share/java/$jar.jar" ] || { echo "missing /usr/share/java/$jar.jar (scripts/deps.sh installs libjetty9-java libservlet-api-java)" >&2; exit 1; }
  cp="$cp:/usr/share/java/$jar.jar"
done
rm -rf "$work/classes"
mkdir -p "$work/classes"
timeout 180 javac -Xlint:all -Werror -d "$work/classes" -cp "${cp#:}" $(find "$src/src" -name '*.java')
timeout 180 java -cp "$work/classes$cp" dev.ratelimit.client.RateLimitFilterTest
