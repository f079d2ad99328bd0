#!/bin/sh
# test-module.sh PKG_DIR WORK_DIR — ctest client_go_module: `go test` of the ratelimit module in
# module mode with no network. go.mod stays what an app's build sees (require redigo v1.8.3);
# this copies it into WORK_DIR/offline.mod, adds a replace onto Debian's packaged redigo
# sources (golang-github-gomodule-redigo-dev), and tests with -modfile and GOPROXY=off, so
# nothing is downloaded and the committed go.mod needs no replace for this machine.
set -eu
pkg=$1 work=$2
redigo=/usr/share/gocode/src/github.com/gomodule/redigo
if [ ! -f "$redigo/go.mod" ]; then
  echo "test-module.sh: $redigo missing (scripts/deps.sh installs golang-github-gomodule-redigo-dev)" >&2
  exit 1
fi
mkdir -p "$work"
cp "$pkg/go.mod" "$work/offline.mod"
rm -f "$work/offline.sum"
cd "$pkg"
export GO111MODULE=on GOPROXY=off GOWORK=off GOFLAGS="-modfile=$work/offline.mod" GOTOOLCHAIN=local GOPATH="$work/gopath"
go mod edit -replace "github.com/gomodule/redigo=$redigo" "$work/offline.mod"
go vet .
exec go test -count=1 "-exec=setpriv --pdeathsig KILL --" .
