// middleware_options.go — what the rate middleware (middleware.go) is told, checked once when it
// is made, and the decision it hands the handler (DecisionFrom). The options are those users of
// express-rate-limit, slowapi and redis_rate expect (issue 31), named as the Node and Python
// clients name them: the header set and problem+json as ratelimitd's settings, a custom refusal,
// a default key (the client address through trusted proxies), skip-successful / skip-failed.
// Invariant: options that would fail every request are refused at construction (issue 31 defect
// 7: no Key was a nil dereference per request and a misspelt policy a 500 per request).
package ratelimit

import (
	"context"
	"encoding/json"
	"net/http"
)

// MiddlewareOptions: Policy (or PolicyFunc) is required; everything else has a default.
type MiddlewareOptions struct {
	Policy     string
	PolicyFunc func(*http.Request) string
	// Key is what a request counts against (a user id, an API key). Default: the client's address
	// (ClientKey), X-Forwarded-For believed only from TrustedProxies, as ratelimitd does.
	Key func(*http.Request) string
	// TrustedProxies: addresses or CIDR blocks ("10.0.0.0/8", "::1") whose X-Forwarded-For the
	// default key believes. Default none: the key is the connecting peer.
	TrustedProxies []string
	Cost           func(*http.Request) int64 // default 1
	Skip           func(*http.Request) bool  // requests let through without a decision or headers
	OnError        func(*http.Request, error)

	// Headers: the rate-limit fields sent, as ratelimitd's `headers:` (default HeadersIETF).
	Headers HeaderSet
	// ProblemJSON: a 429's body as application/problem+json, as ratelimitd's `problem_json: true`.
	ProblemJSON bool
	// StatusCode of a refusal (default 429; 400-599). Headers and Retry-After are kept.
	StatusCode int
	// Message: a refusal's body instead of ratelimitd's — a string (text/plain), a
	// func(*http.Request, RateLimitInfo) any giving one, or any other value (sent as JSON).
	Message any
	// Handler answers a refusal itself (the rate-limit fields are already set): a page, a redirect.
	Handler func(http.ResponseWriter, *http.Request, RateLimitInfo)
	// SkipSuccessfulRequests refunds the unit of an admitted request whose status is below 400
	// (count only failures); SkipFailedRequests that of one at 400 or above (count successes).
	SkipSuccessfulRequests bool
	SkipFailedRequests     bool

	// Usage: the units an admitted request used, read after the handler returned from the
	// request and the response's headers (those the handler set); ok false: the estimate (Cost)
	// stands. Needs a Limiter that is also a Reporter (both back-ends are).
	Usage func(r *http.Request, header http.Header) (used int64, ok bool)
	// OnReportError hears of a report after the response that failed (its request is done),
	// a refund of SkipSuccessfulRequests / SkipFailedRequests included.
	OnReportError func(*http.Request, error)
}

// RateLimitInfo is the decision as the handler sees it (DecisionFrom).
type RateLimitInfo struct {
	Policy string
	Key    string
	Cost   int64
	Decision
}

type infoKey struct{}

// DecisionFrom is the decision the nearest rate middleware made for this request (ok false when
// none did, e.g. a skipped request).
func DecisionFrom(ctx context.Context) (RateLimitInfo, bool) {
	i, ok := ctx.Value(infoKey{}).(RateLimitInfo)
	return i, ok
}

// messageFunc is the function form of MiddlewareOptions.Message.
type messageFunc = func(*http.Request, RateLimitInfo) any

func checkOptions(l Limiter, o MiddlewareOptions) (TrustedProxies, error) {
	bad := func(m string) (TrustedProxies, error) {
		return TrustedProxies{}, &Error{Code: "invalid_policy", Message: "MiddlewareOptions." + m}
	}
	switch {
	case l == nil:
		return TrustedProxies{}, &Error{Code: "invalid_policy", Message: "Middleware: a Limiter is required"}
	case o.Policy == "" && o.PolicyFunc == nil:
		return bad("Policy or PolicyFunc is required")
	case o.StatusCode != 0 && (o.StatusCode < 400 || o.StatusCode > 599):
		return bad("StatusCode must be 400-599 (or 0: 429)")
	case o.Handler != nil && (o.Message != nil || o.StatusCode != 0):
		return bad("Handler answers refusals itself: leave Message and StatusCode out")
	}
	if err := o.Headers.check(); err != nil {
		return TrustedProxies{}, err
	}
	if _, isFunc := o.Message.(messageFunc); o.Message != nil && !isFunc {
		if _, isString := o.Message.(string); !isString {
			if _, err := json.Marshal(o.Message); err != nil {
				return bad("Message must be a string, a func(*http.Request, RateLimitInfo) any, or a value encoding/json can send: " + err.Error())
			}
		}
	}
	if _, ok := l.(Reporter); (o.Usage != nil || o.SkipSuccessfulRequests || o.SkipFailedRequests) && !ok {
		return bad("Usage, SkipSuccessfulRequests and SkipFailedRequests need a Limiter that is also a Reporter (has Report)")
	}
	trusted, err := NewTrustedProxies(o.TrustedProxies)
	if err != nil {
		return TrustedProxies{}, err
	}
	if r, ok := l.(*RedisLimiter); ok && o.PolicyFunc == nil {
		if _, err := r.policy(o.Policy); err != nil {
			return TrustedProxies{}, err
		}
	}
	return trusted, nil
}
