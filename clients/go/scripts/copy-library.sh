#!/bin/sh
# copy-library.sh — `go generate` in clients/go/src/ratelimit runs this: it copies the build's
# Redis function library into the package (library/ratelimit_<version>.lua, embedded by
# library.go), so that the Go package ships the library as the Node and Python packages do.
# A Go package is its source tree (GOPATH or module zip): there is no build step to copy it at
# install time, so the copy is committed, and TestBundledLibraryIsTheBuilds (client_go) fails
# while it differs from the build's. Source: RATELIMIT_REDIS_LIBRARY (a file, or a directory
# holding one ratelimit_<version>.lua), else <checkout>/build/share/ratelimit/redis.
set -eu
pkg=$(pwd)
src=${RATELIMIT_REDIS_LIBRARY:-$pkg/../../../../build/share/ratelimit/redis}
if [ -d "$src" ]; then
  set -- "$src"/ratelimit_????????????.lua
  if [ $# -ne 1 ] || [ ! -f "$1" ]; then
    echo "copy-library.sh: $src must hold exactly one ratelimit_<version>.lua (build ratelimit first)" >&2
    exit 1
  fi
  src=$1
fi
if [ ! -f "$src" ]; then
  echo "copy-library.sh: $src: no function library (build ratelimit first, or set RATELIMIT_REDIS_LIBRARY)" >&2
  exit 1
fi
mkdir -p "$pkg/library"
rm -f "$pkg"/library/ratelimit_*.lua
cp "$src" "$pkg/library/"
echo "copy-library.sh: library/$(basename "$src")"
