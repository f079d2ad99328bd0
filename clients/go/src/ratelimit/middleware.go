// middleware.go — net/http middleware: Middleware(limiter, opts)(handler), or per route
// LimitFunc(limiter, opts, handlerFunc). Admitted requests go on with ratelimitd's rate-limit
// fields set (the header set of opts.Headers) and the decision in their context
// (DecisionFrom); denied ones are answered here with ratelimitd's 429 (400 for a cost over the
// capacity), rendered by headers.go, or with the refusal the options give (StatusCode, Message,
// Handler). The failure policy is the limiter's own. A key or cost the request brought that
// ratelimitd would refuse (*Error invalid_key or invalid_cost: empty, too long) answers
// ratelimitd's 400 {"error", "message"} on either back-end (issue 31 defect 6: it was a 500);
// any other *Error answers 500 and is passed to OnError, since it is the application's bug.
// After the response (docs/usage.md): an admitted request's unit is refunded when
// SkipSuccessfulRequests / SkipFailedRequests say its status does not count; otherwise, with
// Usage, Cost is the estimate and the request is reconciled (usage.go) with the units Usage
// reads from the request and the response's headers (e.g. an LLM answer's token count). Either is
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

// NewMiddleware limits every request the handler sees. The error is an *Error (invalid_policy
// or unknown_policy) for options that would fail every request: no limiter, no Policy nor
// PolicyFunc, a Policy a RedisLimiter does not have (ratelimitd's policies are its own, known
// from its answers), a bad header set, status, message or trusted proxy, or Usage / Skip*
// without a Reporter.
func NewMiddleware(l Limiter, o MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	trusted, err := checkOptions(l, o)
	if err != nil {
		return nil, err
	}
	if o.Key == nil {
		o.Key = func(r *http.Request) string { return ClientKey(r, trusted) }
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(l, &o, next, w, r) })
	}, nil
}

// Middleware is NewMiddleware for options written in the program: it panics with the *Error.
func Middleware(l Limiter, o MiddlewareOptions) func(http.Handler) http.Handler {
	m, err := NewMiddleware(l, o)
	if err != nil {
		panic(err)
	}
	return m
}

// LimitFunc limits one route: mux.Handle("/search", ratelimit.LimitFunc(l, opts, search)).
// It panics as Middleware does.
func LimitFunc(l Limiter, o MiddlewareOptions, f http.HandlerFunc) http.Handler {
	return Middleware(l, o)(f)
}

func serve(l Limiter, o *MiddlewareOptions, next http.Handler, w http.ResponseWriter, r *http.Request) {
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
	if err == nil && d.Reason == "policy_conflict" {
		d = conflictAsFailure(l, o, r, policy, d)
	}
	info, known := l.Describe(policy)
	failure := d.Reason == "failed_open" || d.Reason == "failed_closed"
	if err == nil && !known && !failure {
		err = &Error{Code: "protocol", Message: "no quota or window known for policy " + policy}
	}
	if err != nil {
		if o.OnError != nil {
			o.OnError(r, err)
		}
		http.Error(w, "rate limiter: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !known {
		// ratelimitd has not answered once since the app started, so nothing says the policy's
		// quota and window: the failure policy still answers (issue 31 defect 1), without the
		// rate-limit fields it cannot fill in truthfully.
		info = PolicyInfo{Name: policy}
	}
	if d.Limit != 0 {
		info.Quota = d.Limit
	}
	a := RenderDecisionsWith([]Decision{d}, []PolicyInfo{info}, RenderOptions{Headers: o.Headers, ProblemJSON: o.ProblemJSON})
	for _, h := range a.Headers {
		if known || h[0] == "Retry-After" || h[0] == "Cache-Control" {
			w.Header().Set(h[0], h[1])
		}
	}
	rl := RateLimitInfo{Policy: policy, Key: key, Cost: cost, Decision: d}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, rl))
	if a.Status == http.StatusTooManyRequests {
		refuse(o, w, r, rl, a)
		return
	}
	if a.Status != http.StatusOK {
		write(w, a.Status, a.ContentType, a.Body)
		return
	}
	if !d.Allowed || (o.Usage == nil && !o.SkipSuccessfulRequests && !o.SkipFailedRequests) {
		next.ServeHTTP(w, r)
		return
	}
	res := &Reservation{Policy: policy, Key: key, Estimate: cost, Decision: d, l: l.(Reporter)}
	sw := &statusWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r)
	afterResponse(o, r, res, sw)
}

// conflictFailer is a limiter answering a policy_conflict decision by its own failure path.
type conflictFailer interface {
	conflictAsFailure(policy string, d Decision) Decision
}

// conflictAsFailure: the failure policy's decision for a policy_conflict one, reported as the
// limiter reports a failure; a Limiter of the app's own is answered FailOpen (both back-ends'
// default) and the conflict told to the middleware's OnError.
func conflictAsFailure(l Limiter, o *MiddlewareOptions, r *http.Request, policy string, d Decision) Decision {
	if f, ok := l.(conflictFailer); ok {
		return f.conflictAsFailure(policy, d)
	}
	if o.OnError != nil {
		o.OnError(r, PolicyConflictError(policy, d.RetryAfter))
	}
	return failureDecision(FailOpen, d.Limit)
}

// afterResponse settles an admitted request's reservation once its handler has returned: the
// unit refunded when the Skip* options say this status does not count, else its Usage reported.
// The request's context ends with the handler: the limiter's own timeout bounds the call.
func afterResponse(o *MiddlewareOptions, r *http.Request, res *Reservation, sw *statusWriter) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK // net/http's answer for a handler that wrote nothing
	}
	failed := status >= 400
	var settle func() error
	switch {
	case (failed && o.SkipFailedRequests) || (!failed && o.SkipSuccessfulRequests):
		settle = func() error { _, err := res.Cancel(context.Background()); return err }
	case o.Usage != nil:
		used, ok := o.Usage(r, sw.Header())
		if !ok {
			return
		}
		settle = func() error { _, err := res.Reconcile(context.Background(), used); return err }
	default:
		return
	}
	go func() {
		if err := settle(); err != nil && o.OnReportError != nil {
			o.OnReportError(r, err)
		}
	}()
}

// refuse answers a 429: ratelimitd's answer, or the options' Handler, StatusCode and Message.
func refuse(o *MiddlewareOptions, w http.ResponseWriter, r *http.Request, rl RateLimitInfo, a Answer) {
	if o.Handler != nil {
		o.Handler(w, r, rl)
		return
	}
	status := a.Status
	if o.StatusCode != 0 {
		status = o.StatusCode
	}
	m := o.Message
	if f, ok := m.(messageFunc); ok {
		m = f(r, rl)
	}
	switch v := m.(type) {
	case nil:
		write(w, status, a.ContentType, a.Body)
	case string:
		write(w, status, "text/plain; charset=utf-8", v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": "rate_limited", "message": "Message could not be encoded: " + err.Error()})
		}
		write(w, status, "application/json", string(b))
	}
}

func write(w http.ResponseWriter, status int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
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
