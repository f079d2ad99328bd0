#!/usr/bin/env bash
# clients/java/scripts/ctest.sh SOURCE_DIR WORK_DIR — the Java client's test as ctest runs it:
# Maven builds the jar offline as a user's CI would on Debian (pom.xml: `mvn -o` with
# /etc/maven/settings-debian.xml, whose local repository is Debian's /usr/share/maven-repo;
# nothing from Maven Central) into WORK_DIR/maven, then RateLimitFilterTest runs on that jar and
# its test classes: RateLimitFilterTest (Jetty 9 + the filter + a real ratelimitd on real Redis),
# then RedisLimiterTest (the Redis back-end: conformance vectors, race, outages), then
# JakartaFilterTest (the jakarta.servlet filter in Debian's embedded Tomcat 10), then
# LeaseApiTest (the lease API on a real ratelimitd), then ConcurrencyFilterTest (ConcurrencyFilter
# in Jetty 9 on a real ratelimitd). The jar bundles
# the build's function library (RATELIMIT_REDIS_LIBRARY). Bounded: Maven 300 s, each test 180 s.
# Nothing outlives the run: this script, `timeout` and `java` get SIGKILL when the process that
# started them dies (util-linux's setpriv --pdeathsig, preserved across exec), and the test starts
# redis-server and ratelimitd the same way (RateLimitFilterTest.start), so killing ctest, this
# script or the JVM takes every server of the run with it.
set -euo pipefail
[ -n "${RATELIMIT_DIES_WITH_PARENT:-}" ] || RATELIMIT_DIES_WITH_PARENT=1 exec setpriv --pdeathsig KILL -- "$0" "$@"
src=$1 work=$2
cp=""
for jar in jetty9-server jetty9-servlet jetty9-http jetty9-io jetty9-util jetty9-security servlet-api \
           tomcat10-catalina tomcat10-coyote tomcat10-util tomcat10-util-scan tomcat10-juli tomcat10-api tomcat10-jni \
           tomcat10-servlet-api tomcat10-annotations-api tomcat10-jaspic-api; do
  [ -f "/usr/share/java/$jar.jar" ] || { echo "missing /usr/share/java/$jar.jar (scripts/deps.sh installs libjetty9-java libservlet-api-java libtomcat10-java)" >&2; exit 1; }
  cp="$cp:/usr/share/java/$jar.jar"
done
if ! command -v mvn >/dev/null || [ ! -f /etc/maven/settings-debian.xml ]; then
  echo "missing mvn or /etc/maven/settings-debian.xml (scripts/deps.sh installs maven maven-debian-helper)" >&2
  exit 1
fi
# The Jakarta filter is the javax one over jakarta.servlet, line for line from `package` on (two
# Servlet APIs with unrelated types; the logic is FilterCore's): a drift fails here.
jsrc=$src/src/main/java/dev/ratelimit/client
if ! diff <(sed -n '/^package/,$p' "$jsrc/RateLimitFilter.java" | sed -e 's/javax\.servlet/jakarta.servlet/g' -e 's/\bRateLimitFilter\b/JakartaRateLimitFilter/g') \
          <(sed -n '/^package/,$p' "$jsrc/JakartaRateLimitFilter.java"); then
  echo "JakartaRateLimitFilter.java differs from RateLimitFilter.java with javax -> jakarta: change both" >&2
  exit 1
fi
# The same for the concurrency filter pair (ConcurrencyFilter / JakartaConcurrencyFilter).
if ! diff <(sed -n '/^package/,$p' "$jsrc/ConcurrencyFilter.java" | sed -e 's/javax\.servlet/jakarta.servlet/g' -e 's/\bConcurrencyFilter\b/JakartaConcurrencyFilter/g') \
          <(sed -n '/^package/,$p' "$jsrc/JakartaConcurrencyFilter.java"); then
  echo "JakartaConcurrencyFilter.java differs from ConcurrencyFilter.java with javax -> jakarta: change both" >&2
  exit 1
fi
rm -rf "$work/maven"
(cd "$src" && setpriv --pdeathsig KILL -- timeout 300 mvn -B -q -s /etc/maven/settings-debian.xml -o \
   "-Dratelimit.build.dir=$work/maven" "-Dratelimit.library.dir=${RATELIMIT_REDIS_LIBRARY:?ctest sets it}" package)
jar=$(ls "$work"/maven/ratelimit-client-*.jar)
for test in RateLimitFilterTest RedisLimiterTest JakartaFilterTest LeaseApiTest ConcurrencyFilterTest; do
  setpriv --pdeathsig KILL -- timeout 180 setpriv --pdeathsig KILL -- java -cp "$jar:$work/maven/test-classes$cp" "dev.ratelimit.client.$test"
done
