// library_test.go — the function library the package carries (library.go, issue 31 defect 5):
// found with no option and no RATELIMIT_REDIS_LIBRARY, and the same bytes as the build's.
package ratelimit

import (
	"os"
	"testing"
	"time"
)

func TestBundledLibraryIsTheBuilds(t *testing.T) {
	build, err := FindLibrary(os.Getenv("RATELIMIT_REDIS_LIBRARY"), "")
	if err != nil {
		t.Fatalf("the build's library: %v", err)
	}
	t.Setenv("RATELIMIT_REDIS_LIBRARY", "")
	got, err := FindLibrary("", "")
	if err != nil {
		t.Fatalf("without RATELIMIT_REDIS_LIBRARY: %v", err)
	}
	if got.Version != build.Version || got.Text != build.Text {
		t.Fatalf("the package's copy (library/ratelimit_%s.lua) is not the build's (ratelimit_%s.lua): "+
			"run `go generate` in clients/go/src/ratelimit after building, and commit library/", got.Version, build.Version)
	}
	l, err := NewRedisLimiter("redis://127.0.0.1:1/0", Options{
		Policies: map[string]PolicySpec{"api": {Algorithm: "fixed_window", Limit: 10, Window: time.Minute}}})
	if err != nil {
		t.Fatalf("NewRedisLimiter without RATELIMIT_REDIS_LIBRARY: %v", err)
	}
	defer l.Close()
	if l.LibraryVersion() != build.Version {
		t.Fatalf("limiter speaks %s, the build is %s", l.LibraryVersion(), build.Version)
	}
}
