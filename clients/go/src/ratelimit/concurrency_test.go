// concurrency_test.go — leases through a real ratelimitd (memory store): the lease API (acquire,
// renew, release with an outcome, bad input refused before sending, ratelimitd's codes returned)
// and ConcurrencyLimit under `db: limit 2` — with the handler blocked exactly 2 requests get in
// and the 3rd gets ratelimitd's 429; once they finish (200, 5xx, a panic) the leases are back;
// on an AIMD policy a 5xx and a timeout lower the learned limit (the outcomes reach ratelimitd);
// ratelimitd down → the failure policy.
package ratelimit

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

const leaseYAML = `store: {type: memory}
policies:
  db: {algorithm: concurrency, limit: 2, lease_ttl: 60s}
  api: {algorithm: fixed_window, limit: 5, window: 60s}
  ad: {algorithm: concurrency, limit: adaptive, estimator: aimd, max_limit: 64, initial_limit: 16, sample_window: 0, lease_ttl: 60s}
`

func eventuallyTrue(t *testing.T, what string, check func() bool) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for !check() {
		if time.Now().After(end) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaseAPI(t *testing.T) {
	d := startRatelimitd(t, leaseYAML)
	l, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, OnFailure: FailClosed})
	ctx := context.Background()
	a, err := l.AcquireLease(ctx, "db", "k", 1, LeaseOptions{})
	b, _ := l.AcquireLease(ctx, "db", "k", 1, LeaseOptions{})
	c, _ := l.AcquireLease(ctx, "db", "k", 1, LeaseOptions{})
	if err != nil || !a.Allowed || a.ID == "" || a.Remaining != 1 || !b.Allowed || b.Remaining != 0 || c.Allowed || c.Reason != "over_limit" || c.RetryAfter <= 0 {
		t.Fatalf("leases: %+v %+v %+v %v", a, b, c, err)
	}
	if a.RateLimitPolicy == "" {
		t.Errorf("ratelimitd's RateLimit-Policy not kept: %+v", a)
	}
	if ok, err := l.RenewLease(ctx, &a); !ok || err != nil || a.Expires <= 0 {
		t.Errorf("renew: %v %v %+v", ok, err, a)
	}
	if ok, err := l.ReleaseLease(ctx, a, Outcome{Outcome: "ok", Latency: 12 * time.Millisecond}); !ok || err != nil {
		t.Errorf("release a: %v %v", ok, err)
	}
	if ok, err := l.ReleaseLease(ctx, a, Outcome{}); ok || err != nil {
		t.Errorf("a second release of a: %v %v", ok, err)
	}
	if ok, _ := l.RenewLease(ctx, &a); ok {
		t.Errorf("a released lease renewed")
	}
	if ok, err := l.ReleaseLease(ctx, b, Outcome{Outcome: "dropped"}); !ok || err != nil {
		t.Errorf("release b: %v %v", ok, err)
	}
	// Bad input: refused before sending, with the code ratelimitd would answer.
	for _, tc := range []struct {
		err  error
		code string
	}{
		{func() error { _, e := l.AcquireLease(ctx, "db", "", 1, LeaseOptions{}); return e }(), "invalid_key"},
		{func() error { _, e := l.AcquireLease(ctx, "db", "k", 0, LeaseOptions{}); return e }(), "invalid_cost"},
		{func() error { _, e := l.ReleaseLease(ctx, b, Outcome{Outcome: "fine"}); return e }(), "invalid_outcome"},
		{func() error { _, e := l.ReleaseLease(ctx, b, Outcome{Latency: -time.Millisecond}); return e }(), "invalid_latency"},
		{func() error { _, e := l.ReleaseLease(ctx, b, Outcome{Latency: 2 * time.Hour}); return e }(), "invalid_latency"},
	} {
		if codeOf(tc.err) != tc.code {
			t.Errorf("want %s, got %v", tc.code, tc.err)
		}
	}
	// ratelimitd's own codes.
	if _, err := l.AcquireLease(ctx, "nope", "k", 1, LeaseOptions{}); codeOf(err) != "unknown_policy" {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := l.AcquireLease(ctx, "api", "k", 1, LeaseOptions{}); codeOf(err) != "not_a_concurrency_policy" {
		t.Errorf("a rate policy: %v", err)
	}
	if l.Failures() != 0 {
		t.Errorf("failures: %d", l.Failures())
	}
}

func TestConcurrencyMiddleware(t *testing.T) {
	d := startRatelimitd(t, leaseYAML)
	l, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, OnFailure: FailClosed})
	gate := make(chan struct{})
	entered := make(chan struct{}, 8)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-gate
		_, _ = io.WriteString(w, "done")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) { panic("handler bug") })
	srv := httptest.NewUnstartedServer(ConcurrencyLimit(l, ConcurrencyOptions{Policy: "db", Key: func(r *http.Request) string { return r.Header.Get("x-client") }})(mux))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the /panic handler's stack, expected
	srv.Start()
	defer srv.Close()
	get := func(path, client string) (int, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("x-client", client)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil // the panicking handler's connection is closed by net/http
		}
		_, _ = io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header
	}
	remaining := func(client string) int64 {
		lease, _ := l.AcquireLease(context.Background(), "db", client, 1, LeaseOptions{})
		_, _ = l.ReleaseLease(context.Background(), lease, Outcome{})
		return lease.Remaining
	}
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() { s, _ := get("/slow", "c"); done <- s }()
	}
	<-entered
	<-entered
	status, h := get("/slow", "c")
	if status != 429 || h.Get("Retry-After") == "" || h.Get("RateLimit-Policy") == "" {
		t.Fatalf("the 3rd request: %d %v", status, h)
	}
	close(gate)
	if a, b := <-done, <-done; a != 200 || b != 200 {
		t.Fatalf("the 2 admitted: %d %d", a, b)
	}
	eventuallyTrue(t, "both leases back after 200", func() bool { return remaining("c") == 1 })
	for _, path := range []string{"/fail", "/panic"} {
		get(path, "c")
		eventuallyTrue(t, "the lease back after "+path, func() bool { return remaining("c") == 1 })
	}
	// Bad input from the request: ratelimitd's 400, not a 500.
	if status, _ := get("/slow", ""); status != 400 {
		t.Errorf("no key: %d", status)
	}
	// Options that would fail every request are refused when the middleware is made.
	func() {
		defer func() {
			if e, _ := recover().(error); e == nil || codeOf(e) != "invalid_policy" {
				t.Errorf("no Policy accepted")
			}
		}()
		ConcurrencyLimit(l, ConcurrencyOptions{Key: func(*http.Request) string { return "k" }})
	}()
	for _, o := range []ConcurrencyOptions{{Policy: "db", Timeout: -1}, {Policy: "db", TrustedProxies: []string{"10.0.0.0/33"}}} {
		if _, err := NewConcurrencyLimit(l, o); err == nil || codeOf(err) != "invalid_policy" {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// No Key: the client's address (the peer: no trusted proxy), whatever X-Forwarded-For says.
	// While the middleware holds its lease, a lease of "127.0.0.1" sees the last unit taken.
	byAddr := httptest.NewServer(ConcurrencyLimit(l, ConcurrencyOptions{Policy: "db"})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			inner, err := l.AcquireLease(r.Context(), "db", "127.0.0.1", 1, LeaseOptions{})
			if err != nil || !inner.Allowed {
				t.Errorf("%+v %v", inner, err)
				return
			}
			_, _ = l.ReleaseLease(context.Background(), inner, Outcome{})
			fmt.Fprint(w, inner.Remaining)
		})))
	defer byAddr.Close()
	req, _ := http.NewRequest("GET", byAddr.URL, nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "0" {
		t.Errorf("default key: %d %q (remaining 0: the middleware's lease was the peer's)", res.StatusCode, body)
	}
}

func TestConcurrencyOutcomesReachAnAdaptiveLimit(t *testing.T) {
	d := startRatelimitd(t, leaseYAML)
	l, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, OnFailure: FailClosed})
	mux := http.NewServeMux()
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 503) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(200 * time.Millisecond) })
	srv := httptest.NewServer(ConcurrencyLimit(l, ConcurrencyOptions{Policy: "ad", Timeout: 50 * time.Millisecond,
		Key: func(*http.Request) string { return "k" }})(mux))
	defer srv.Close()
	limit := func() int64 {
		lease, _ := l.AcquireLease(context.Background(), "ad", "k", 1, LeaseOptions{})
		_, _ = l.ReleaseLease(context.Background(), lease, Outcome{Outcome: "ok", Latency: time.Millisecond})
		return lease.Limit
	}
	base := limit()
	if res, err := http.Get(srv.URL + "/fail"); err != nil || res.StatusCode != 503 {
		t.Fatalf("/fail: %v %v", res, err)
	}
	eventuallyTrue(t, "the drop learned", func() bool { return limit() < base })
	dropped := limit()
	if res, err := http.Get(srv.URL + "/slow"); err != nil || res.StatusCode != 200 {
		t.Fatalf("/slow: %v %v", res, err)
	}
	eventuallyTrue(t, "the timeout learned", func() bool { return limit() < dropped })
	t.Logf("AIMD limit %d → %d after a 503 → %d after a timeout", base, dropped, limit())
}

func TestConcurrencyRatelimitdDown(t *testing.T) {
	dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	for _, policy := range []FailurePolicy{FailOpen, FailClosed} {
		l, _ := NewRatelimitdLimiter(dead, RatelimitdOptions{Timeout: 2 * time.Second, OnFailure: policy})
		srv := httptest.NewServer(ConcurrencyLimit(l, ConcurrencyOptions{Policy: "db", Key: func(*http.Request) string { return "k" }})(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })))
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want := 200
		if policy == FailClosed {
			want = 429
			if res.Header.Get("Retry-After") != "1" {
				t.Errorf("closed: Retry-After %q", res.Header.Get("Retry-After"))
			}
		}
		if res.StatusCode != want || l.Failures() != 1 {
			t.Errorf("%s: %d, failures %d", policy, res.StatusCode, l.Failures())
		}
		lease, _ := l.AcquireLease(context.Background(), "db", "k", 1, LeaseOptions{})
		if ok, err := l.ReleaseLease(context.Background(), lease, Outcome{Outcome: "ok"}); ok || err != nil {
			t.Errorf("%s: released a failure-policy lease: %v %v", policy, ok, err)
		}
		if ok, _ := l.RenewLease(context.Background(), &lease); ok != (policy == FailOpen) {
			t.Errorf("%s: renew %v", policy, ok)
		}
		srv.Close()
	}
}

// ratelimitd's own Redis down behind an `on_failure: open` store: it grants with "lease_id":
// null. That is the failure policy's grant (nothing to release), not a protocol error — which
// made the middleware answer 500.
func TestConcurrencyStoreFailingOpenInsideRatelimitd(t *testing.T) {
	redis := startRedis(t)
	d := startRatelimitd(t, fmt.Sprintf("store: { type: redis, url: %q, on_failure: open, command_timeout: 300ms }\n"+
		"policies:\n  db: { algorithm: concurrency, limit: 2, lease_ttl: 30s }\n", redis.url))
	l, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, OnFailure: FailClosed})
	if lease, err := l.AcquireLease(context.Background(), "db", "k", 1, LeaseOptions{}); err != nil || lease.ID == "" {
		t.Fatalf("with Redis up: %+v %v", lease, err)
	}
	redis.stop()
	lease, err := l.AcquireLease(context.Background(), "db", "k", 1, LeaseOptions{})
	if err != nil || !lease.Allowed || lease.Reason != "failed_open" || lease.ID != "" {
		t.Fatalf("Redis down, ratelimitd failing open: %+v %v", lease, err)
	}
	if ok, err := l.ReleaseLease(context.Background(), lease, Outcome{Outcome: "ok"}); ok || err != nil {
		t.Errorf("released the failure policy's grant: %v %v", ok, err)
	}
	srv := httptest.NewServer(ConcurrencyLimit(l, ConcurrencyOptions{Policy: "db", Key: func(*http.Request) string { return "k" }})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "done" {
		t.Errorf("the middleware: %d %q", res.StatusCode, body)
	}
	if l.Failures() != 0 {
		t.Errorf("ratelimitd answered: this client's failure policy must not count it (%d)", l.Failures())
	}
}
