#!/usr/bin/env bash
# tests/packaging/check_debs.sh BUILD_DIR SOURCE_DIR — builds the Debian packages with CPack
# into a temporary directory and checks them as a user of each would:
#   ratelimitd        its binary, unit, conffile /etc/ratelimit/ratelimit.yaml, shlib Depends,
#                     and the packaged binary answers --version;
#   ratelimit-tools   ratelimit-sim and ratelimit-bench;
#   libratelimit-dev  headers (no internal one), static libraries, CMake package, pkg-config
#                     files, test vectors -- and tests/install/consumer builds and runs against
#                     the package's files extracted into a scratch root; its Depends name
#                     every Debian package its headers, pkg-config files and CMake package use;
#   all three         install with dpkg into a scratch root (its package database a copy of this
#                     machine's, so Depends must name installed packages; maintainer scripts run
#                     chrootless under fakeroot): postinst creates the user `ratelimit` and makes
#                     the configuration readable by its group only; no placeholder metadata.
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
         ./etc/ratelimit/ratelimit.yaml ./usr/share/doc/ratelimitd/README.md \
         ./usr/share/doc/ratelimitd/configuration.md ./usr/share/doc/ratelimitd/copyright
dpkg-deb --ctrl-tarfile "$d" | tar -t | grep -qx ./postinst || fail "ratelimitd has no postinst"
dpkg-deb --ctrl-tarfile "$d" | tar -xO ./conffiles | grep -qxF /etc/ratelimit/ratelimit.yaml ||
  fail "ratelimitd: /etc/ratelimit/ratelimit.yaml is not a conffile"
depends=$(dpkg-deb -f "$d" Depends)
for lib in libsystemd0 libhiredis libyaml-cpp libstdc++6; do
  grep -q "$lib" <<< "$depends" || fail "ratelimitd Depends lacks $lib: $depends"
done
echo "ratelimitd Depends: $depends"

t=$(deb ratelimit-tools)
has "$t" ./usr/bin/ratelimit-sim ./usr/bin/ratelimit-bench ./usr/share/doc/ratelimit-tools/copyright

v=$(deb libratelimit-dev)
has "$v" ./usr/include/ratelimit/limiter.h ./usr/include/ratelimit/version.h \
         ./usr/include/ratelimit/test_vectors/vectors.h \
         ./usr/lib/libratelimit_core.a ./usr/lib/libratelimit_memory.a ./usr/lib/libratelimit_http.a \
         ./usr/lib/libratelimit_redis.a ./usr/lib/libratelimit_test_vectors.a \
         ./usr/lib/cmake/ratelimit/ratelimitConfig.cmake ./usr/lib/pkgconfig/ratelimit.pc \
         ./usr/lib/pkgconfig/ratelimit-redis.pc ./usr/share/ratelimit/test_vectors/token_bucket.json \
         ./usr/share/doc/libratelimit-dev/copyright

# Metadata: a real maintainer, no placeholder anywhere in the control fields.
for p in "$d" "$t" "$v"; do
  if dpkg-deb -f "$p" | grep -n 'example\.invalid'; then fail "$(basename "$p"): placeholder metadata"; fi
  [ -n "$(dpkg-deb -f "$p" Maintainer)" ] || fail "$(basename "$p"): no Maintainer"
done

# libratelimit-dev's Depends, derived from its files: the package of every header its headers
# include (outside the C++ library and libc, which libstdc++-12-dev brings), of every module its
# pkg-config files require, and of every find_dependency() of its CMake package.
dev_depends=$(dpkg-deb -f "$v" Depends)
echo "libratelimit-dev Depends: $dev_depends"
need_pkg() { # package why
  grep -qE "(^|, )$1( |,|$)" <<< "$dev_depends" || fail "libratelimit-dev Depends lacks $1 ($2): $dev_depends"
}
devroot=$out/devroot
dpkg-deb -x "$v" "$devroot"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for h in $(grep -rhoE '#include <[^>]+>' "$devroot/usr/include" | sed 's/#include <\(.*\)>/\1/' | sort -u); do
  [ -e "$devroot/usr/include/$h" ] && continue
  for dir in /usr/include "/usr/include/$multiarch"; do
    [ -e "$dir/$h" ] || continue
    pkg=$(dpkg -S "$dir/$h" 2>/dev/null | head -1 | cut -d: -f1) || true
    case "$pkg" in ""|libstdc++-*|libc6-dev|linux-libc-dev) ;; *) need_pkg "$pkg" "#include <$h>" ;; esac
    break
  done
done
for pc in "$devroot"/usr/lib/pkgconfig/*.pc; do
  for mod in $(sed -n 's/^Requires: //p' "$pc" | tr ',' '\n' | awk '{print $1}' | grep -v '^ratelimit'); do
    path=$(pkg-config --variable=pcfiledir "$mod")/$mod.pc
    pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || fail "no package ships $path"
    need_pkg "$pkg" "$(basename "$pc") Requires $mod"
  done
done
declare -A cmake_pkg=([Boost]=libboost1.81-dev [OpenSSL]=libssl-dev [RatelimitHiredis]=libhiredis-dev
                      [nlohmann_json]=nlohmann-json3-dev [Threads]=)
cmake_deps=$( (grep -rhoE 'find_dependency\([A-Za-z_]+' "$devroot/usr/lib/cmake/ratelimit" | sed 's/.*(//'
                grep -rhoE '\[==\[[A-Za-z_]+' "$devroot/usr/lib/cmake/ratelimit" | sed 's/\[==\[//') | sort -u)
grep -qx RatelimitHiredis <<< "$cmake_deps" || fail "the CMake package lists no dependency of ratelimit::redis (format changed?)"
for dep in $cmake_deps; do
  [ -v "cmake_pkg[$dep]" ] || fail "ratelimitConfig.cmake: find_dependency($dep) has no known Debian package (add it here)"
  [ -z "${cmake_pkg[$dep]}" ] || need_pkg "${cmake_pkg[$dep]}" "the CMake package's find_dependency($dep)"
done
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
# Install all three with dpkg into a scratch root whose package database is this machine's
# (so Depends must be installed packages), maintainer scripts run chrootless under fakeroot.
clean=$out/clean
mkdir -p "$clean/var/lib/dpkg/info" "$clean/var/lib/dpkg/updates" "$clean/etc"
cp /var/lib/dpkg/status "$clean/var/lib/dpkg/status"
touch "$clean/var/lib/dpkg/available"
cp /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/login.defs "$clean/etc/" 2>/dev/null ||
  cp /etc/passwd /etc/group /etc/login.defs "$clean/etc/"
sed -i '/^ratelimit:/d' "$clean/etc/passwd" "$clean/etc/group" "$clean/etc/shadow" "$clean/etc/gshadow" 2>/dev/null || true
cat > "$out/clean-check.sh" <<EOS
set -e
# (dpkg warns about every host package whose file list is not copied: noise, kept in a log)
dpkg --root="$clean" --force-not-root --force-script-chrootless --log=/dev/null \\
     -i "$d" "$t" "$v" > "$out/dpkg.log" 2>&1 || { grep -v 'files list file' "$out/dpkg.log"; exit 1; }
grep -q '^ratelimit:' "$clean/etc/passwd" || { echo "postinst did not create the user ratelimit"; exit 1; }
gid=\$(awk -F: '\$1 == "ratelimit" { print \$3 }' "$clean/etc/group")
[ "\$(stat -c '%a %g' "$clean/etc/ratelimit/ratelimit.yaml")" = "640 \$gid" ] ||
  { echo "configuration: \$(stat -c '%a %U:%g' "$clean/etc/ratelimit/ratelimit.yaml"), want 640 root:ratelimit"; exit 1; }
[ "\$(stat -c '%a' "$clean/etc/ratelimit")" = 750 ] || { echo "/etc/ratelimit is not 0750"; exit 1; }
dpkg --root="$clean" --force-not-root --force-script-chrootless --log=/dev/null \\
     -i "$d" > "$out/dpkg.log" 2>&1 ||  # the same version again: the postinst must be idempotent
  { grep -v 'files list file' "$out/dpkg.log"; exit 1; }
dpkg-query --admindir="$clean/var/lib/dpkg" -W -f='\${Package} \${Status}\n' ratelimitd ratelimit-tools libratelimit-dev
EOS
timeout 120 fakeroot bash "$out/clean-check.sh" || fail "installing the packages into a scratch root"
"$clean/usr/bin/ratelimitd" --config "$clean/etc/ratelimit/ratelimit.yaml" --check ||
  fail "the installed configuration does not pass --check"

echo "packages OK: $(cd "$out" && ls ./*.deb | xargs -n1 basename | tr '\n' ' ')"
