// support_test.go — what the tests start: a throwaway redis-server and a real ratelimitd (the
// project's build) on free loopback ports, each stopped by pid, every wait bounded.
// Environment: RATELIMIT_TEST_REDIS_URL (shared Redis; else one is started), RATELIMIT_BIN_DIR,
// RATELIMIT_REDIS_LIBRARY, RATELIMIT_VECTORS_DIR, RATELIMIT_CONFORMANCE_DIR.
package ratelimit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var runID = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixMilli())

func sourceDir() string {
	wd, _ := os.Getwd() // clients/go/src/ratelimit
	return filepath.Join(wd, "..", "..", "..", "..")
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func init() {
	if os.Getenv("RATELIMIT_REDIS_LIBRARY") == "" {
		os.Setenv("RATELIMIT_REDIS_LIBRARY", filepath.Join(sourceDir(), "build", "share", "ratelimit", "redis"))
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitPort(t *testing.T, port int, cmd *exec.Cmd, what string) {
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		if cmd.ProcessState != nil {
			t.Fatalf("%s exited", what)
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not listen on %d within 10 s", what, port)
}

type proc struct {
	url  string
	cmd  *exec.Cmd
	once sync.Once
}

func (p *proc) stop() {
	p.once.Do(func() {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = p.cmd.Process.Kill()
				<-done
			}
		}
	})
}

// dieWithTest makes the kernel SIGKILL the server when this test process dies, however it dies
// (a ctest timeout kills `go test` without cleanups): Linux's PR_SET_PDEATHSIG. It follows the OS
// thread that started the child; the Go runtime ends a thread only under runtime.LockOSThread,
// which these tests do not use.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func startRedis(t *testing.T) *proc {
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no", "--dir", dir)
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{url: fmt.Sprintf("redis://127.0.0.1:%d/0", port), cmd: cmd}
	t.Cleanup(p.stop)
	waitPort(t, port, cmd, "redis-server")
	return p
}

func testRedis(t *testing.T) string {
	if u := os.Getenv("RATELIMIT_TEST_REDIS_URL"); u != "" {
		return u
	}
	return startRedis(t).url
}

func startRatelimitd(t *testing.T, yaml string) *proc {
	port := freePort(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "ratelimit.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("listen: 127.0.0.1:%d\n%s", port, yaml)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(envOr("RATELIMIT_BIN_DIR", filepath.Join(sourceDir(), "build", "bin")), "ratelimitd")
	cmd := exec.Command(bin, "--config", config)
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(p.stop)
	waitPort(t, port, cmd, "ratelimitd")
	return p
}

// inFlight runs fn(i) for i < n with at most width at once.
func inFlight[R any](n, width int, fn func(int) R) []R {
	out := make([]R, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			out[i] = fn(i)
			<-sem
		}(i)
	}
	wg.Wait()
	return out
}

// awaitWindowRoom returns when a window of length window has at least room left, sleeping past
// the boundary when it lacks it (to 50 ms after it: a known instant, not a guess). fixed_window
// and sliding_window_counter count in windows aligned to the Unix epoch on Redis' clock (this
// machine's: the tests use loopback Redis), so a test asserting exact counts on the server's
// clock flips when a boundary falls mid-count: the count resets or is reweighted. A test calls
// it just before it counts, with room its own generous bound on how long the counting takes.
// The Go twin of tests/support/window_room.h and loopback.await_window_room.
func awaitWindowRoom(t *testing.T, window, room time.Duration) {
	if room >= window {
		t.Fatalf("awaitWindowRoom: room %v must be below the window %v", room, window)
	}
	if left := window - time.Duration(time.Now().UnixNano()%int64(window)); left < room {
		time.Sleep(left + 50*time.Millisecond)
	}
}
