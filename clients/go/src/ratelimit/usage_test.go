// usage_test.go — usage known after the response (docs/usage.md) from the Go client, on the
// Redis back-end and on a real ratelimitd sharing that Redis: Report (debt, refund, bad input),
// Reserve → Reconcile / Cancel, and the middleware reconciling after the handler with the
// usage the response's headers carry (an LLM-style token count).
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A 1 h sliding log: nothing recorded here ages out while the test runs.
// `shared` refills one unit in 1000 s: its level is what was recorded, to the unit, while the
// test runs.
var usagePolicies = map[string]PolicySpec{"tokens": {Algorithm: "sliding_window_log", Limit: 10000, Window: time.Hour},
	"shared": {Algorithm: "token_bucket", Rate: 0.001, Burst: 1000000}}

const usageYAML = `store: { type: redis, url: "%s", key_prefix: "%s", on_failure: closed, command_timeout: 30s }
policies:
  tokens: { algorithm: sliding_window_log, limit: 10000, window: 1h }
  db:     { algorithm: concurrency, limit: 2, lease_ttl: 10s }
  shared: { algorithm: token_bucket, rate: 0.001, burst: 1000000 }
`

type usageBackEnd struct {
	name string
	l    interface {
		Limiter
		Reporter
		Reserve(ctx context.Context, policy, key string, estimate int64) (*Reservation, error)
	}
}

func usageSetup(t *testing.T) []usageBackEnd {
	f := setupWith(t, usageYAML, "rl:go-usage-"+runID+":", usagePolicies)
	return []usageBackEnd{{"redis", f.viaRedis}, {"ratelimitd", f.viaD}}
}

// left is what is left of key now: a report of 0 records nothing and answers the state.
func left(t *testing.T, l Reporter, key string) int64 {
	d, err := l.Report(context.Background(), "tokens", key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// eventually polls cond every 20 ms and fails after 30 s (a hang guard, not a claim on speed).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 30 s: %s", what)
		}
	}
}

func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprint(err)
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	backEnds := usageSetup(t)
	for _, b := range backEnds {
		b := b
		t.Run(b.name+": report is a debt past the limit, a refund gives back at most what is held", func(t *testing.T) {
			k := "report-" + b.name
			if d, _ := b.l.Record(ctx, "tokens", k, 9900); d.Remaining != 100 {
				t.Fatalf("acquire 9900: %+v", d)
			}
			if d, err := b.l.Report(ctx, "tokens", k, 500); err != nil || !d.Allowed || d.Reason != "within_limit" || d.Remaining != 0 || d.RetryAfter != 0 {
				t.Errorf("report +500: %+v %v", d, err)
			}
			if d, _ := b.l.Record(ctx, "tokens", k, 1); d.Allowed || d.RetryAfter <= 0 {
				t.Errorf("acquire in debt: %+v", d)
			}
			if d, _ := b.l.Report(ctx, "tokens", k, -900); d.Remaining != 500 {
				t.Errorf("refund -900: %+v", d)
			}
			if d, _ := b.l.Report(ctx, "tokens", k, -20000); d.Remaining != 10000 {
				t.Errorf("refund never above the limit: %+v", d)
			}
			for _, c := range []struct {
				policy string
				cost   int64
				code   string
			}{{"tokens", MaxCost + 1, "invalid_cost"}, {"tokens", -MaxCost - 1, "invalid_cost"}, {"nope", 1, "unknown_policy"}} {
				if _, err := b.l.Report(ctx, c.policy, k, c.cost); codeOf(err) != c.code {
					t.Errorf("report %s %d: want %s, got %v", c.policy, c.cost, c.code, err)
				}
			}
			if n := left(t, b.l, k); n != 10000 {
				t.Errorf("bad reports recorded something: %d left", n)
			}
		})
		t.Run(b.name+": Reserve → Reconcile reports actual − estimate; Cancel refunds; each settles once", func(t *testing.T) {
			k := "reserve-" + b.name
			r, err := b.l.Reserve(ctx, "tokens", k, 500)
			if err != nil || r.Decision.Remaining != 9500 {
				t.Fatalf("reserve: %+v %v", r, err)
			}
			if d, err := r.Reconcile(ctx, 700); err != nil || d.Remaining != 9300 {
				t.Errorf("reconcile 700: %+v %v", d, err)
			}
			if _, err := r.Reconcile(ctx, 700); codeOf(err) != "invalid_request" {
				t.Errorf("second reconcile: %v", err)
			}
			r, _ = b.l.Reserve(ctx, "tokens", k, 500)
			if d, _ := r.Reconcile(ctx, 100); d == nil || d.Remaining != 9200 {
				t.Errorf("reconcile 100 (400 refunded): %+v", d)
			}
			r, _ = b.l.Reserve(ctx, "tokens", k, 500)
			if d, err := r.Reconcile(ctx, 500); d != nil || err != nil {
				t.Errorf("reconcile = estimate reports nothing: %+v %v", d, err)
			}
			// The pattern: defer Cancel, reconcile on success; an abandoned request gets its estimate back.
			func() {
				r, _ := b.l.Reserve(ctx, "tokens", k, 500)
				defer r.Cancel(ctx)
			}()
			func() {
				r, _ := b.l.Reserve(ctx, "tokens", k, 500)
				defer r.Cancel(ctx)
				if _, err := r.Reconcile(ctx, 600); err != nil {
					t.Error(err)
				}
			}()
			if n := left(t, b.l, k); n != 8100 { // 9200 − 500 (reconciled at 500) − 600
				t.Errorf("after the cancelled and the deferred-cancel reservations: %d left, want 8100", n)
			}
			big, _ := b.l.Reserve(ctx, "tokens", k, 8000)
			if d, _ := big.Reconcile(ctx, 9000); d == nil || d.Remaining != 0 {
				t.Errorf("into debt: %+v", d)
			}
			denied, _ := b.l.Reserve(ctx, "tokens", k, 500)
			if d, err := denied.Cancel(ctx); denied.Decision.Allowed || d != nil || err != nil {
				t.Errorf("a refused reservation records nothing, its cancel sends nothing: %+v %+v %v", denied.Decision, d, err)
			}
			if n := left(t, b.l, k); n != 0 {
				t.Errorf("%d left, want 0", n)
			}
			if _, err := denied.Reconcile(ctx, -1); codeOf(err) != "invalid_cost" {
				t.Errorf("negative actual: %v", err)
			}
		})
		t.Run(b.name+": the middleware reconciles after the handler with the response's usage", func(t *testing.T) {
			var mu sync.Mutex
			var reportErrs []error
			mux := http.NewServeMux()
			mux.HandleFunc("/chat", func(w http.ResponseWriter, r *http.Request) {
				if tokens := r.URL.Query().Get("tokens"); tokens != "" {
					w.Header().Set("X-Usage-Tokens", tokens) // as an LLM API's usage field
				}
				_, _ = w.Write([]byte(`{"answer":"..."}`))
			})
			srv := httptest.NewServer(Middleware(b.l, MiddlewareOptions{Policy: "tokens",
				Key:  func(r *http.Request) string { return r.Header.Get("X-Client") },
				Cost: func(*http.Request) int64 { return 500 },
				Usage: func(_ *http.Request, h http.Header) (int64, bool) {
					n, err := strconv.ParseInt(h.Get("X-Usage-Tokens"), 10, 64)
					return n, err == nil
				},
				OnReportError: func(_ *http.Request, err error) { mu.Lock(); reportErrs = append(reportErrs, err); mu.Unlock() },
			})(mux))
			defer srv.Close()
			k := "mw-" + b.name
			steps := []struct {
				path   string
				status int
				left   int64
			}{{"/chat?tokens=700", 200, 9300}, {"/chat?tokens=100", 200, 9200}, {"/chat", 200, 8700}, {"/chat?tokens=20000", 200, 0}}
			for _, s := range steps {
				if a := get(t, srv.URL+s.path, k); a.status != s.status {
					t.Fatalf("%s: %d %s", s.path, a.status, a.body)
				}
				eventually(t, fmt.Sprintf("%s: %d left", s.path, s.left), func() bool { return left(t, b.l, k) == s.left })
			}
			if a := get(t, srv.URL+"/chat?tokens=1", k); a.status != 429 {
				t.Errorf("in debt: %d", a.status)
			}
			get(t, srv.URL+"/chat?tokens=-5", k+"-bad")
			eventually(t, "a negative usage told to OnReportError", func() bool { mu.Lock(); defer mu.Unlock(); return len(reportErrs) == 1 })
			if codeOf(reportErrs[0]) != "invalid_cost" {
				t.Errorf("report error: %v", reportErrs[0])
			}
		})
	}
	// The pattern under concurrency: 50 clients, half on each back-end (one count in one
	// Redis), each reserving 500 and reconciling its actual (100 … 1,500) ten times: what the key
	// holds at the end is exactly the sum of the actuals.
	t.Run("50 concurrent clients reserve 500 and reconcile: the recorded units are the sum of the actuals", func(t *testing.T) {
		const clients, rounds = 50, 10
		var wg sync.WaitGroup
		sums := make([]int64, clients)
		errs := make(chan error, clients*rounds)
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				l := backEnds[i%2].l
				for j := 0; j < rounds; j++ {
					actual := int64(100 + (i*37+j*101)%1401)
					r, err := l.Reserve(ctx, "shared", "race", 500)
					if err == nil && !r.Decision.Allowed {
						err = fmt.Errorf("reservation refused: %+v", r.Decision)
					}
					if err == nil {
						_, err = r.Reconcile(ctx, actual)
					}
					if err != nil {
						errs <- err
						return
					}
					sums[i] += actual
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var sum int64
		for _, s := range sums {
			sum += s
		}
		d, err := backEnds[0].l.Report(ctx, "shared", "race", 0)
		if err != nil || 1000000-d.Remaining != sum {
			t.Errorf("recorded %d, the actuals sum to %d (%v)", 1000000-d.Remaining, sum, err)
		}
	})
	t.Run("ratelimitd refuses a report to a concurrency policy", func(t *testing.T) {
		if _, err := backEnds[1].l.Report(ctx, "db", "k", 1); err == nil {
			t.Error("accepted")
		}
	})
}
