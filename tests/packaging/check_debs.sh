#!/usr/bin/env bash
# tests/packaging/check_debs.sh BUILD_DIR SOURCE_DIR — builds the Debian packages with CPack
# into a temporary directory and checks them as a user of each would:
#   ratelimitd        its binary, unit, conffile /etc/ratelimit/ratelimit.yaml, shlib Depends,
#                     and the packaged binary answers --version;
#   ratelimit-tools   ratelimit-sim and ratelimit-bench;
#   libratelimit-dev  headers (no internal one), static libraries, CMake package, pkg-config
#                     files, test vectors -- and tests/install/consumer builds and runs against
#                     the package's files extracted into a scratch root.
# Bounded: every step has a timeout; the packages are left in BUILD_DIR/tests/packaging/debs.
set -euo pipefail
build=$1 src=$2
out=$build/tests/packaging/debs
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
timeout 600 cpack --config "$build/CPackConfig.cmake" -B "$out" > "$out/cpack.log" 2>&1 ||
  { cat "$out/cpack.log" >&2; fail "cpack"; }
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
arch=$(dpkg --print-architecture)

deb() { # name -> path of the package file
  local f="$out/${1}_${version}_${arch}.deb"
  [ -f "$f" ] || fail "no package $f (have: $(ls "$out"/*.deb 2>/dev/null | xargs -n1 basename | tr '\n' ' '))"
  echo "$f"
}
has() { # package path...
  local p=$1; shift
  local listing; listing=$(dpkg-deb -c "$p" | awk '{print $NF}')
  for f in "$@"; do
    grep -qxF -- "$f" <<< "$listing" || fail "$(basename "$p") lacks $f"
  done
}

d=$(deb ratelimitd)
has "$d" ./usr/bin/ratelimitd ./lib/systemd/system/ratelimitd.service \
         ./etc/ratelimit/ratelimit.yaml ./usr/share/doc/ratelimitd/README.md
dpkg-deb --ctrl-tarfile "$d" | tar -xO ./conffiles | grep -qxF /etc/ratelimit/ratelimit.yaml ||
  fail "ratelimitd: /etc/ratelimit/ratelimit.yaml is not a conffile"
depends=$(dpkg-deb -f "$d" Depends)
for lib in libsystemd0 libhiredis libyaml-cpp libstdc++6; do
  grep -q "$lib" <<< "$depends" || fail "ratelimitd Depends lacks $lib: $depends"
done
echo "ratelimitd Depends: $depends"

t=$(deb ratelimit-tools)
has "$t" ./usr/bin/ratelimit-sim ./usr/bin/ratelimit-bench

v=$(deb libratelimit-dev)
has "$v" ./usr/include/ratelimit/limiter.h ./usr/include/ratelimit/version.h \
         ./usr/include/ratelimit/test_vectors/vectors.h \
         ./usr/lib/libratelimit_core.a ./usr/lib/libratelimit_memory.a ./usr/lib/libratelimit_http.a \
         ./usr/lib/libratelimit_redis.a ./usr/lib/libratelimit_test_vectors.a \
         ./usr/lib/cmake/ratelimit/ratelimitConfig.cmake ./usr/lib/pkgconfig/ratelimit.pc \
         ./usr/lib/pkgconfig/ratelimit-redis.pc ./usr/share/ratelimit/test_vectors/token_bucket.json
# Exactly the public headers (include/ratelimit/*.h, version.h, the vector runner's), no binary.
want=$( (cd "$src/include" && ls ratelimit/*.h; echo ratelimit/version.h; echo ratelimit/test_vectors/vectors.h
        echo ratelimit/test_vectors/distributed_vectors.h) | sort)
got=$(dpkg-deb -c "$v" | awk '{print $NF}' | sed -n 's|^\./usr/include/\(.*\.h\)$|\1|p' | sort)
[ "$want" = "$got" ] || fail "libratelimit-dev headers differ from the public ones: $(diff <(echo "$want") <(echo "$got") | tr '\n' ' ')"
if dpkg-deb -c "$v" | awk '{print $NF}' | grep -E '^\./usr/bin/'; then
  fail "libratelimit-dev ships a binary"
fi
for p in "$d" "$t"; do
  if dpkg-deb -c "$p" | awk '{print $NF}' | grep -E '^\./usr/(include|lib/[^/]*\.a)'; then
    fail "$(basename "$p") ships library files"
  fi
done

root=$out/root
dpkg-deb -x "$d" "$root"
dpkg-deb -x "$v" "$root"
got=$(timeout 10 "$root/usr/bin/ratelimitd" --version) || fail "packaged ratelimitd --version"
[[ $got == "ratelimitd $version"* ]] || fail "packaged ratelimitd --version printed: $got"
echo "$got"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
timeout 300 cmake -S "$src/tests/install/consumer" -B "$out/consumer" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$root/usr" "${launcher[@]}" > "$out/consumer.log" 2>&1 ||
  { cat "$out/consumer.log" >&2; fail "configure the consumer against libratelimit-dev"; }
timeout 300 cmake --build "$out/consumer" -j2 >> "$out/consumer.log" 2>&1 ||
  { cat "$out/consumer.log" >&2; fail "build the consumer against libratelimit-dev"; }
timeout 60 "$out/consumer/consumer" | tail -1
echo "packages OK: $(cd "$out" && ls ./*.deb | xargs -n1 basename | tr '\n' ' ')"
