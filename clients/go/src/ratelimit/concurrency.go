// concurrency.go — net/http concurrency middleware: ConcurrencyLimit(limiter, opts)(handler)
// holds a lease of a ratelimitd concurrency policy while the handler runs, as Netflix's
// concurrency-limits servlet filter does, and as the Node and Python clients' middleware.
// Acquired before the handler: refused → ratelimitd's 429 (Retry-After, its RateLimit fields,
// the body headers.go renders for a rate denial); an unreachable ratelimitd answers by the
// limiter's failure policy (failed_open runs the handler without a lease), and so does a
// refusal for policy_conflict (another definition of the policy's name holds the key: the app's
// configuration error, counted in Failures() and told to OnError naming the policy, never a 429
// with the conflict's wait). Released once, in a
// defer, with the outcome:
//   - the handler took longer than Timeout → "timeout" (it is not cut off);
//   - status >= 500 or a panic → "dropped" (the panic goes on); else "ok"; each with the
//     measured latency;
//   - the request's context cancelled (the client went away) → no outcome (a cancel says
//     nothing about the backend's load).
//
// The release uses a context of its own (the request's may be done), bounded by the limiter's
// Timeout. A priority class is read from PriorityHeader when set and sent as `priority`.
package ratelimit

import (
	"context"
	"net/http"
	"time"
)

// ConcurrencyOptions: Policy (or PolicyFunc) is required; Key defaults to the client's address
// (ClientKey, X-Forwarded-For believed only from TrustedProxies, as the rate middleware);
// Cost (default 1), Skip, PriorityHeader, MaxWait, Timeout, OnReleaseError.
type ConcurrencyOptions struct {
	Policy         string
	PolicyFunc     func(*http.Request) string
	Key            func(*http.Request) string
	TrustedProxies []string
	Cost           func(*http.Request) int64
	Skip           func(*http.Request) bool
	PriorityHeader string
	MaxWait        time.Duration
	Timeout        time.Duration // a handler running longer releases "timeout"; 0: never
	OnReleaseError func(*http.Request, error)
}

// statusWriter remembers the status the handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// outcomeOf a handler that ran `ran` and wrote `status` (0: none), or panicked.
func outcomeOf(status int, panicked, cancelled bool, ran, timeout time.Duration) Outcome {
	latency := ran
	if latency >= MaxLatency {
		latency = 0
	}
	switch {
	case cancelled:
		return Outcome{}
	case timeout > 0 && ran > timeout:
		return Outcome{Outcome: "timeout", Latency: latency}
	case panicked || status >= 500:
		return Outcome{Outcome: "dropped", Latency: latency}
	}
	return Outcome{Outcome: "ok", Latency: latency}
}

// NewConcurrencyLimit wraps handlers in a lease. The error is an *Error (invalid_policy) for
// options that would fail every request: no limiter, no Policy nor PolicyFunc, a negative
// Timeout or MaxWait, a bad trusted proxy.
func NewConcurrencyLimit(l *RatelimitdLimiter, o ConcurrencyOptions) (func(http.Handler) http.Handler, error) {
	bad := func(m string) (func(http.Handler) http.Handler, error) {
		return nil, &Error{Code: "invalid_policy", Message: m}
	}
	switch {
	case l == nil:
		return bad("ConcurrencyLimit: a RatelimitdLimiter is required")
	case o.Policy == "" && o.PolicyFunc == nil:
		return bad("ConcurrencyOptions.Policy or PolicyFunc is required")
	case o.Timeout < 0 || o.MaxWait < 0:
		return bad("ConcurrencyOptions.Timeout and MaxWait must not be negative")
	}
	trusted, err := NewTrustedProxies(o.TrustedProxies)
	if err != nil {
		return nil, err
	}
	if o.Key == nil {
		o.Key = func(r *http.Request) string { return ClientKey(r, trusted) }
	}
	return concurrencyLimit(l, o), nil
}

// ConcurrencyLimit is NewConcurrencyLimit for options written in the program: it panics with
// the *Error.
func ConcurrencyLimit(l *RatelimitdLimiter, o ConcurrencyOptions) func(http.Handler) http.Handler {
	m, err := NewConcurrencyLimit(l, o)
	if err != nil {
		panic(err)
	}
	return m
}

func concurrencyLimit(l *RatelimitdLimiter, o ConcurrencyOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if o.Skip != nil && o.Skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			policy, cost := policyAndCost(r, o.Policy, o.PolicyFunc, o.Cost)
			lo := LeaseOptions{MaxWait: o.MaxWait}
			if o.PriorityHeader != "" {
				lo.Priority = r.Header.Get(o.PriorityHeader)
			}
			lease, err := l.AcquireLease(r.Context(), policy, o.Key(r), cost, lo)
			if badRequest(w, err) {
				return
			}
			if err != nil {
				http.Error(w, "rate limiter: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if lease.Reason == "policy_conflict" {
				l.conflictAsFailure(policy, Decision{Reason: lease.Reason, Limit: lease.Limit, RetryAfter: lease.RetryAfter})
				lease = l.failureLease(lease.Policy, lease.Key)
			}
			if lease.RateLimitPolicy != "" {
				w.Header().Set("RateLimit-Policy", lease.RateLimitPolicy)
			}
			if !lease.Allowed {
				refuseLease(w, lease)
				return
			}
			if lease.RateLimit != "" {
				w.Header().Set("RateLimit", lease.RateLimit)
			}
			sw := &statusWriter{ResponseWriter: w}
			start, panicked := time.Now(), true
			defer func() {
				out := outcomeOf(sw.status, panicked, r.Context().Err() != nil, time.Since(start), o.Timeout)
				ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
				defer cancel()
				if _, err := l.ReleaseLease(ctx, lease, out); err != nil && o.OnReleaseError != nil {
					o.OnReleaseError(r, err)
				}
			}()
			next.ServeHTTP(sw, r)
			panicked = false
		})
	}
}

// refuseLease answers a refused lease as a rate denial is answered, with ratelimitd's own fields.
func refuseLease(w http.ResponseWriter, lease Lease) {
	d := Decision{Reason: lease.Reason, Limit: lease.Limit, Remaining: lease.Remaining,
		ResetAfter: lease.RetryAfter, RetryAfter: lease.RetryAfter}
	a := RenderDecisions([]Decision{d}, []PolicyInfo{{Name: lease.Policy, Quota: lease.Limit}})
	for _, h := range a.Headers {
		if h[0] == "RateLimit-Policy" || h[0] == "RateLimit" {
			continue // ratelimitd's own (set above / below)
		}
		w.Header().Set(h[0], h[1])
	}
	if a.Status == http.StatusTooManyRequests && lease.RateLimit != "" {
		w.Header().Set("RateLimit", lease.RateLimit)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	_, _ = w.Write([]byte(a.Body))
}
