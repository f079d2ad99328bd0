// conflict_test.go — issue 31 defect 8: two definitions of one policy name on one key. Before,
// each algorithm read its own fields of the shared state (the repro admitted 21 against a
// limit of 10); now the second definition's calls answer policy_conflict and count nothing, on
// the Redis back-end (reason 6 from the function library) and through ratelimitd (409).
package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestTwoDefinitionsOfOneNameNeverShareACount(t *testing.T) {
	url := testRedis(t)
	prefix := fmt.Sprintf("conflict:%d:", time.Now().UnixNano())
	ctx := context.Background()
	window, err := NewRedisLimiter(url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 5 * time.Second,
		Policies: map[string]PolicySpec{"api": {Algorithm: "fixed_window", Limit: 10, Window: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	defer window.Close()
	bucket, err := NewRedisLimiter(url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 5 * time.Second,
		Policies: map[string]PolicySpec{"api": {Algorithm: "token_bucket", Rate: 0.1, Burst: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	admitted, conflicts := 0, 0
	for i := 0; i < 100; i++ {
		l := window
		if i%2 == 1 {
			l = bucket
		}
		d, err := l.Record(ctx, "api", "user-1", 1)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if d.Allowed {
			admitted++
		}
		if d.Reason == "policy_conflict" {
			conflicts++
			if l != bucket || d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
				t.Fatalf("call %d: %+v", i, d)
			}
		}
	}
	if admitted != 10 || conflicts != 50 {
		t.Fatalf("admitted %d (want 10), conflicts %d (want 50)", admitted, conflicts)
	}
}

func TestRatelimitdAnswersAConflictAsADecision(t *testing.T) {
	url := testRedis(t)
	prefix := fmt.Sprintf("conflictd:%d:", time.Now().UnixNano())
	d := startRatelimitd(t, fmt.Sprintf("store: { type: redis, url: %q, key_prefix: %q }\npolicies:\n"+
		"  api: { algorithm: fixed_window, limit: 10, window: 60s }\n"+
		"  db: { algorithm: concurrency, limit: 5, lease_ttl: 60s }\n", url, prefix))
	ctx := context.Background()
	other, err := NewRedisLimiter(url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 5 * time.Second,
		Policies: map[string]PolicySpec{"api": {Algorithm: "token_bucket", Rate: 0.1, Burst: 10},
			"db": {Algorithm: "sliding_window_counter", Limit: 5, Window: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, policy := range []string{"api", "db"} {
		if got, err := other.Record(ctx, policy, "k", 1); err != nil || !got.Allowed {
			t.Fatalf("%s: %+v %v", policy, got, err)
		}
	}
	l, err := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 5 * time.Second, OnFailure: FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Record(ctx, "api", "k", 1)
	if err != nil || got.Allowed || got.Reason != "policy_conflict" || got.RetryAfter <= 0 || got.RetryAfter > 11*time.Second {
		t.Fatalf("ratelimitd on a key the bucket holds: %+v %v", got, err)
	}
	lease, err := l.AcquireLease(ctx, "db", "k", 1, LeaseOptions{})
	if err != nil || lease.Allowed || lease.Reason != "policy_conflict" || lease.RetryAfter <= 0 {
		t.Fatalf("a lease on a key a rate policy holds: %+v %v", lease, err)
	}
	if after, err := other.Check(ctx, "api", "k", 1); err != nil || after.Remaining != 8 {
		t.Fatalf("the bucket's own count moved: %+v %v", after, err)
	}
}
