// library.go — the Redis function library this client speaks (docs/redis-functions.md,
// "Versioning"): finding its text, reading its version, and making sure Redis has it.
// Where the text comes from, first found wins: Options.Library (the text, a file, or a directory
// holding one ratelimit_<version>.lua), Options.LibraryVersion (one already loaded, no text),
// RATELIMIT_REDIS_LIBRARY, the copy this package carries (library/, embedded), then
// /usr/share/ratelimit/redis, /usr/local/share/ratelimit/redis.
// The embedded copy: a Go package is its source tree, with no install step to copy the build's
// library in (as npm pack and setup.py do), so library/ratelimit_<version>.lua is committed,
// written by `go generate` (scripts/copy-library.sh) and held equal to the build's by
// TestBundledLibraryIsTheBuilds.
package ratelimit

//go:generate sh ../../scripts/copy-library.sh

import (
	"context"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Library is a function library: its version (12 hex digits) and text ("" when only the
// version is known).
type Library struct {
	Version string
	Text    string
}

//go:embed library
var bundled embed.FS

var (
	libraryHeader = regexp.MustCompile(`^#!lua name=ratelimit_([0-9a-f]{12})\n`)
	libraryFile   = regexp.MustCompile(`^ratelimit_[0-9a-f]{12}\.lua$`)
	hex12         = regexp.MustCompile(`^[0-9a-f]{12}$`)
)

func missing(format string, a ...any) error {
	return &Error{Code: "library_missing", Message: fmt.Sprintf(format, a...)}
}

// ParseLibrary reads a library's text.
func ParseLibrary(text string) (Library, error) {
	m := libraryHeader.FindStringSubmatch(text)
	if m == nil {
		return Library{}, missing("not a ratelimit function library (its first line must be '#!lua name=ratelimit_<12 hex digits>')")
	}
	return Library{Version: m[1], Text: text}, nil
}

func libraryFromPath(p string) (Library, error) {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		entries, _ := os.ReadDir(p)
		var found []string
		for _, e := range entries {
			if libraryFile.MatchString(e.Name()) {
				found = append(found, e.Name())
			}
		}
		if len(found) != 1 {
			return Library{}, missing("%s holds %d ratelimit_<version>.lua files, expected exactly one", p, len(found))
		}
		p = filepath.Join(p, found[0])
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Library{}, missing("cannot read the function library: %v", err)
	}
	return ParseLibrary(string(b))
}

// FindLibrary resolves option (text or path), version (a loaded library's), the environment
// and the install locations, in that order.
func FindLibrary(option, version string) (Library, error) {
	switch {
	case strings.HasPrefix(option, "#!lua"):
		return ParseLibrary(option)
	case option != "":
		return libraryFromPath(option)
	case version != "":
		if !hex12.MatchString(version) {
			return Library{}, missing("library version must be 12 hex digits, got %q", version)
		}
		return Library{Version: version}, nil
	}
	if env := os.Getenv("RATELIMIT_REDIS_LIBRARY"); env != "" {
		return libraryFromPath(env)
	}
	if lib, ok := bundledLibrary(); ok {
		return lib, nil
	}
	for _, d := range []string{"/usr/share/ratelimit/redis", "/usr/local/share/ratelimit/redis"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return libraryFromPath(d)
		}
	}
	return Library{}, missing("no ratelimit function library: set Options.Library (the file share/ratelimit/redis/ratelimit_<version>.lua of a ratelimit build or install) or RATELIMIT_REDIS_LIBRARY")
}

// bundledLibrary is the copy embedded from library/ (go:embed refuses to compile an empty
// library/, so false only for a file that is not a library).
func bundledLibrary() (Library, bool) {
	entries, _ := bundled.ReadDir("library")
	for _, e := range entries {
		if libraryFile.MatchString(e.Name()) {
			b, err := bundled.ReadFile("library/" + e.Name())
			if lib, perr := ParseLibrary(string(b)); err == nil && perr == nil {
				return lib, true
			}
		}
	}
	return Library{}, false
}

// ensureLibrary loads lib (when it has the text) or checks that Redis has it; otherwise the
// error names the versions Redis has and what to do.
func ensureLibrary(ctx context.Context, r Redis, lib Library) error {
	loadErr := ""
	if lib.Text != "" {
		_, err := r.Do(ctx, "FUNCTION", "LOAD", lib.Text)
		if err == nil || strings.Contains(err.Error(), "already exists") {
			return nil
		}
		if _, isReply := err.(ReplyError); !isReply {
			return err // the connection, not the library
		}
		loadErr = fmt.Sprintf(" (FUNCTION LOAD failed: %v)", err)
	}
	listed, err := r.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", "ratelimit_*")
	if err != nil {
		return err
	}
	names := libraryNames(listed)
	for _, n := range names {
		if n == "ratelimit_"+lib.Version {
			return nil
		}
	}
	have := "no ratelimit library"
	if len(names) > 0 {
		have = strings.Join(names, ", ")
	}
	return missing("Redis does not have the ratelimit function library version %s that this client speaks%s; it has %s. "+
		"Load this client's copy (redis-cli -x FUNCTION LOAD < ratelimit_%s.lua), or give the client the text so it loads it itself; "+
		"other versions may stay loaded beside it.", lib.Version, loadErr, have, lib.Version)
}
