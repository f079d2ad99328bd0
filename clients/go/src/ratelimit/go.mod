// The ratelimit Go client as a module. Its path is "ratelimit", the GOPATH import path too, so
// the same sources build both ways; the repository has no public import path yet, so an app
// requires it through a replace directive (clients/go/README.md).
// Offline here (Debian's golang-github-gomodule-redigo-dev, no module proxy): ctest client_go_module
// tests with a copy of this file plus `replace github.com/gomodule/redigo =>
// /usr/share/gocode/src/github.com/gomodule/redigo` (clients/go/scripts/test-module.sh), so
// this file stays what an app's build sees. No go.sum: its hashes come from the module proxy,
// which this project's machines do not use; the first online `go mod download` writes it.
module ratelimit

go 1.19

require github.com/gomodule/redigo v1.8.3
