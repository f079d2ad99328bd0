// conflict_middleware_test.go — issue 31 defect 8 as an app sees it: a key holding state of
// another definition of the policy's name (conflict_test.go: the decisions) answered by both
// middlewares by the failure policy (open: the request goes on; closed: the store failure's
// answer, 429 with Retry-After 1), counted and told to OnError naming the policy, never a rate
// denial with the conflict's wait; a lease's renew and release then release nothing.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	fixedAPI  = map[string]PolicySpec{"api": {Algorithm: "fixed_window", Limit: 10, Window: time.Minute}}
	bucketAPI = map[string]PolicySpec{"api": {Algorithm: "token_bucket", Rate: 10.0 / 60, Burst: 10}}
)

// redisOn: a RedisLimiter on url under prefix, telling its errors to *errs.
func redisOn(t *testing.T, url, prefix string, p map[string]PolicySpec, f FailurePolicy, errs *[]error) *RedisLimiter {
	var mu sync.Mutex
	l, err := NewRedisLimiter(url, Options{Policies: p, KeyPrefix: prefix, OnFailure: f, Timeout: 30 * time.Second,
		OnError: func(e error) { mu.Lock(); *errs = append(*errs, e); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// wantConflictReported: the failure path told OnError, naming the policy.
func wantConflictReported(t *testing.T, errs []error, policy string) {
	t.Helper()
	var e *Error
	if len(errs) != 1 || !errors.As(errs[0], &e) || e.Code != "policy_conflict" || !strings.Contains(e.Message, `"`+policy+`"`) {
		t.Fatalf("OnError heard %v", errs)
	}
}

// Both back-ends' middleware: open passes the request on, closed answers as a store failure
// (TestRedisDown: 429 with Retry-After 1), the limiter counts a failure and OnError names the policy.
func TestPolicyConflictInTheMiddleware(t *testing.T) {
	f := setup(t)
	prefix := "rl:go-" + runID + ":"
	var writerErrs []error
	fixed := redisOn(t, f.redisURL, prefix, fixedAPI, FailClosed, &writerErrs)
	ctx := context.Background()
	for _, policy := range []FailurePolicy{FailOpen, FailClosed} {
		var errs []error
		var mu sync.Mutex
		onError := func(e error) { mu.Lock(); errs = append(errs, e); mu.Unlock() }
		viaD, _ := NewRatelimitdLimiter(f.daemon.url, RatelimitdOptions{OnFailure: policy, Timeout: 30 * time.Second, OnError: onError})
		for _, l := range []interface {
			Limiter
			Failures() int64
		}{redisOn(t, f.redisURL, prefix, bucketAPI, policy, &errs), viaD} {
			errs = nil
			client := fmt.Sprintf("mw-%s-%T", policy, l)
			if d, err := fixed.Record(ctx, "api", client, 1); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
			srv := app(l)
			a := get(t, srv.URL+"/items", client)
			srv.Close()
			switch {
			case policy == FailOpen && (a.status != 200 || a.body != `{"items":[]}`):
				t.Errorf("open, %T: %d %v %q", l, a.status, a.header, a.body)
			case policy == FailClosed && (a.status != 429 || a.header.Get("Retry-After") != "1"):
				t.Errorf("closed, %T: %d %v %q", l, a.status, a.header, a.body)
			}
			if l.Failures() != 1 {
				t.Errorf("%s, %T: failures %d", policy, l, l.Failures())
			}
			mu.Lock()
			wantConflictReported(t, errs, "api")
			mu.Unlock()
		}
	}
}

const conflictLeaseYAML = `store: { type: redis, url: "%s", key_prefix: "%s", on_failure: closed, command_timeout: 30s }
policies:
  db: { algorithm: concurrency, limit: 2, lease_ttl: 60s }
`

func TestPolicyConflictOnLeases(t *testing.T) {
	url, prefix := testRedis(t), "rl:go-lease-conflict-"+runID+":"
	d := startRatelimitd(t, fmt.Sprintf(conflictLeaseYAML, url, prefix))
	var writerErrs []error
	fixed := redisOn(t, url, prefix, map[string]PolicySpec{"db": fixedAPI["api"]}, FailClosed, &writerErrs)
	ctx := context.Background()
	for _, policy := range []FailurePolicy{FailOpen, FailClosed} {
		var errs []error
		l, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, OnFailure: policy,
			OnError: func(e error) { errs = append(errs, e) }})
		key := "lease-" + string(policy)
		if dd, err := fixed.Record(ctx, "db", key, 1); err != nil || !dd.Allowed {
			t.Fatalf("%+v %v", dd, err)
		}
		lease, err := l.AcquireLease(ctx, "db", key, 1, LeaseOptions{})
		if err != nil || lease.Allowed || lease.Reason != "policy_conflict" || lease.RetryAfter <= 0 || lease.ID != "" {
			t.Fatalf("%s: acquire %+v %v", policy, lease, err)
		}
		srv := httptest.NewServer(ConcurrencyLimit(l, ConcurrencyOptions{Policy: "db", Key: func(*http.Request) string { return key }})(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })))
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		srv.Close()
		switch {
		case policy == FailOpen && (res.StatusCode != 200 || string(body) != "done"):
			t.Errorf("open: %d %q", res.StatusCode, body)
		case policy == FailClosed && (res.StatusCode != 429 || res.Header.Get("Retry-After") != "1"):
			t.Errorf("closed: %d %v %q", res.StatusCode, res.Header, body)
		}
		if l.Failures() != 1 {
			t.Errorf("%s: failures %d", policy, l.Failures())
		}
		wantConflictReported(t, errs, "db")
	}
	// A lease held, then its key taken by the other definition (the state cleared and written
	// again): renew and release release nothing; the renew says why, the release tells OnError.
	var errs []error
	l, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, OnError: func(e error) { errs = append(errs, e) }})
	lease, err := l.AcquireLease(ctx, "db", "held", 1, LeaseOptions{})
	if err != nil || !lease.Allowed || lease.ID == "" {
		t.Fatalf("acquire: %+v %v", lease, err)
	}
	if err := fixed.Clear(ctx, "db", "held"); err != nil {
		t.Fatal(err)
	}
	if dd, err := fixed.Record(ctx, "db", "held", 1); err != nil || !dd.Allowed {
		t.Fatalf("%+v %v", dd, err)
	}
	if ok, err := l.RenewLease(ctx, &lease); ok || err != nil || lease.Reason != "policy_conflict" {
		t.Errorf("renew: %v %v %+v", ok, err, lease)
	}
	if ok, err := l.ReleaseLease(ctx, lease, Outcome{Outcome: "ok"}); ok || err != nil {
		t.Errorf("release: %v %v", ok, err)
	}
	wantConflictReported(t, errs, "db")
}
