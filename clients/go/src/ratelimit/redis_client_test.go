// redis_client_test.go — the Redis back-end on a client of the app's own (redis_client.go): an
// app's redigo pool, made without any timeout, against a real Redis that stops answering
// (SIGSTOP). Options.Timeout must still bound the decision and the failure policy answer it.
package ratelimit

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

func TestAppsOwnPoolAnswersByTheFailurePolicyWhileRedisHangs(t *testing.T) {
	own := startRedis(t)
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.DialURL(own.url) }} // no timeouts: the app's
	defer pool.Close()
	closed, err := NewRedisLimiterWithPool(pool, Options{Policies: policies, OnFailure: FailClosed, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	open, err := NewRedisLimiterOn(Redigo(pool), Options{Policies: policies, OnFailure: FailOpen, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A real answer first (the library loaded), on fresh keys until one comes: a busy machine
	// may not load the library within 300 ms, which the failure policy answers (TestRedisDown).
	for _, l := range []*RedisLimiter{closed, open} {
		for i := 0; ; i++ {
			if d, err := l.Record(ctx, "api", fmt.Sprint("warm-", i), 1); err == nil && d.Reason == "within_limit" {
				break
			}
			if i == 49 {
				t.Fatal("no within_limit answer in 50 calls while Redis was up")
			}
		}
	}
	if err := own.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.cmd.Process.Signal(syscall.SIGCONT) }) // before own.stop (cleanups run last first)
	failedBefore := closed.Failures()
	t0 := time.Now()
	dc, err1 := closed.Record(ctx, "api", "hung", 1)
	do, err2 := open.Record(ctx, "api", "hung", 1)
	// 300 ms each; 5 s is a bound no machine needs, far below forever (the pool has no timeout).
	if took := time.Since(t0); took > 5*time.Second || err1 != nil || err2 != nil {
		t.Fatalf("took %v, errors %v %v", took, err1, err2)
	}
	if dc.Allowed || dc.Reason != "failed_closed" || !do.Allowed || do.Reason != "failed_open" {
		t.Fatalf("closed %+v open %+v", dc, do)
	}
	if closed.Failures() != failedBefore+1 {
		t.Fatalf("failures %d, want %d", closed.Failures(), failedBefore+1)
	}
}
