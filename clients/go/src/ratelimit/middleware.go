// middleware.go — net/http middleware: Middleware(limiter, opts)(handler). Admitted requests go
// on with RateLimit-Policy and RateLimit set; denied ones are answered here with ratelimitd's
// 429 (400 for a cost over the capacity), rendered by headers.go. The failure policy is the
// limiter's own. A key or cost the request brought that ratelimitd would refuse (*Error
// invalid_key or invalid_cost: empty, too long) answers ratelimitd's 400 {"error", "message"}
// on either back-end (issue 31 defect 6: it was a 500); any other *Error answers 500 and is
// passed to OnError, since it is the application's bug.
// Usage after the response (docs/usage.md): with Usage, Cost is the estimate and each admitted
// request is reconciled (usage.go) once the handler has returned, with the units Usage reads
// from the request and the response's headers (e.g. an LLM answer's token count); the report is
// sent from a goroutine of its own, so the response completes without waiting for it.
package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// Limiter is either back-end (RedisLimiter, RatelimitdLimiter).
type Limiter interface {
	Record(ctx context.Context, policy, key string, cost int64) (Decision, error)
	Check(ctx context.Context, policy, key string, cost int64) (Decision, error)
	Clear(ctx context.Context, policy, key string) error
	Describe(policy string) (PolicyInfo, bool)
}

// MiddlewareOptions: Policy (or PolicyFunc), Key (required), Cost (default 1), Skip.
type MiddlewareOptions struct {
	Policy     string
	PolicyFunc func(*http.Request) string
	Key        func(*http.Request) string
	Cost       func(*http.Request) int64
	Skip       func(*http.Request) bool
	OnError    func(*http.Request, error)
	// Usage: the units an admitted request used, read after the handler returned from the
	// request and the response's headers (those the handler set); ok false: the estimate (Cost)
	// stands. Needs a Limiter that is also a Reporter (both back-ends are).
	Usage func(r *http.Request, header http.Header) (used int64, ok bool)
	// OnReportError hears of a report after the response that failed (its request is done).
	OnReportError func(*http.Request, error)
}

// Middleware limits every request the handler sees. It panics with an *Error (code
// invalid_policy or unknown_policy) on options that would fail every request: no limiter, no
// Key, no Policy nor PolicyFunc, or a Policy a RedisLimiter does not have (ratelimitd's policies
// are its own, known from its answers). Issue 31 defect 7: no Key was a nil dereference per
// request and a misspelt policy a 500 per request.
func Middleware(l Limiter, o MiddlewareOptions) func(http.Handler) http.Handler {
	if err := checkOptions(l, o); err != nil {
		panic(err)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if o.Skip != nil && o.Skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			policy, cost := policyAndCost(r, o.Policy, o.PolicyFunc, o.Cost)
			key := o.Key(r)
			d, err := l.Record(r.Context(), policy, key, cost)
			if badRequest(w, err) {
				return
			}
			info, ok := l.Describe(policy)
			failure := d.Reason == "failed_open" || d.Reason == "failed_closed"
			if err == nil && !ok && failure {
				// ratelimitd has not answered once since the app started, so nothing says the
				// policy's quota and window: the failure policy still answers (issue 31 defect 1),
				// without the RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
				info, ok = PolicyInfo{Name: policy, Quota: d.Limit}, true
			}
			if err != nil || !ok {
				if err == nil {
					err = &Error{Code: "protocol", Message: "no quota or window known for policy " + policy}
				}
				if o.OnError != nil {
					o.OnError(r, err)
				}
				http.Error(w, "rate limiter: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if d.Limit != 0 {
				info.Quota = d.Limit
			}
			a := RenderDecisions([]Decision{d}, []PolicyInfo{info})
			for _, h := range a.Headers {
				if info.Window == 0 && (h[0] == "RateLimit-Policy" || h[0] == "RateLimit") {
					continue // the failure policy's answer before ratelimitd ever answered (above)
				}
				w.Header().Set(h[0], h[1])
			}
			if a.Status != http.StatusOK {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(a.Status)
				_, _ = w.Write([]byte(a.Body))
				return
			}
			if o.Usage == nil || !d.Allowed {
				next.ServeHTTP(w, r)
				return
			}
			res := &Reservation{Policy: policy, Key: key, Estimate: cost, Decision: d, l: l.(Reporter)}
			next.ServeHTTP(w, r)
			if used, ok := o.Usage(r, w.Header()); ok {
				// The request's context ends with this call: the limiter's own timeout bounds it.
				go func() {
					if _, err := res.Reconcile(context.Background(), used); err != nil && o.OnReportError != nil {
						o.OnReportError(r, err)
					}
				}()
			}
		})
	}
}

// policyAndCost: what a request asks for — PolicyFunc's policy over Policy, Cost's (default 1).
func policyAndCost(r *http.Request, policy string, policyFunc func(*http.Request) string, cost func(*http.Request) int64) (string, int64) {
	if policyFunc != nil {
		policy = policyFunc(r)
	}
	c := int64(1)
	if cost != nil {
		c = cost(r)
	}
	return policy, c
}

// badRequest answers ratelimitd's 400 for an *Error about the request's own input.
func badRequest(w http.ResponseWriter, err error) bool {
	var e *Error
	if !errors.As(err, &e) || (e.Code != "invalid_key" && e.Code != "invalid_cost") {
		return false
	}
	body, _ := json.Marshal(map[string]string{"error": e.Code, "message": e.Error()})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	return true
}

func checkOptions(l Limiter, o MiddlewareOptions) error {
	switch {
	case l == nil:
		return &Error{Code: "invalid_policy", Message: "Middleware: a Limiter is required"}
	case o.Key == nil:
		return &Error{Code: "invalid_policy", Message: "MiddlewareOptions.Key is required (the key a request counts against)"}
	case o.Policy == "" && o.PolicyFunc == nil:
		return &Error{Code: "invalid_policy", Message: "MiddlewareOptions.Policy or PolicyFunc is required"}
	}
	if _, ok := l.(Reporter); o.Usage != nil && !ok {
		return &Error{Code: "invalid_policy", Message: "MiddlewareOptions.Usage needs a Limiter that is also a Reporter (has Report)"}
	}
	if r, ok := l.(*RedisLimiter); ok && o.PolicyFunc == nil {
		if _, err := r.policy(o.Policy); err != nil {
			return err
		}
	}
	return nil
}
