// ratelimitd.go — the ratelimitd back-end: decisions by POST /v1/acquire (Record), /v1/peek
// (Check) and /v1/report (Report) of a running ratelimitd (its policies, its store), as the same
// Decision the Redis back-end gives. The body's ms figures (rounded up by ratelimitd) come back
// as durations that render to the same whole seconds; the policy's quota and window are learned
// from RateLimit-Policy (`headers: ietf`, the default; else set Windows). 400 unknown_policy /
// invalid_key / invalid_cost return an *Error with that code; cost_exceeds_capacity is a
// Decision; no answer within Timeout, a refused connection or a 5xx decide by OnFailure.
// Thread-safety: every method may be called from any goroutine.
package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RatelimitdOptions configure a RatelimitdLimiter.
type RatelimitdOptions struct {
	OnFailure  FailurePolicy            // default FailOpen
	Timeout    time.Duration            // default 250 ms
	Windows    map[string]time.Duration // only if ratelimitd sends no RateLimit-Policy
	AdminToken string                   // Authorization: Bearer for Clear (/v1/reset)
	OnError    func(error)
}

// RatelimitdLimiter decides through a running ratelimitd.
type RatelimitdLimiter struct {
	base     string
	client   *http.Client
	o        RatelimitdOptions
	failures atomic.Int64
	mu       sync.Mutex
	infos    map[string]PolicyInfo
}

var policyItem = regexp.MustCompile(`"((?:[^"\\]|\\.)*)";q=(\d+);w=(\d+)`)

// NewRatelimitdLimiter: url like "http://127.0.0.1:8080".
func NewRatelimitdLimiter(url string, o RatelimitdOptions) (*RatelimitdLimiter, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, invalid("url must be http:// or https://, got %q", url)
	}
	if o.OnFailure == "" {
		o.OnFailure = FailOpen
	}
	if o.Timeout <= 0 {
		o.Timeout = 250 * time.Millisecond
	}
	l := &RatelimitdLimiter{base: strings.TrimRight(url, "/"), o: o, infos: map[string]PolicyInfo{},
		client: &http.Client{Timeout: o.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	for n, w := range o.Windows {
		l.infos[n] = PolicyInfo{Name: n, Window: w}
	}
	return l, nil
}

// Failures counts decisions the failure policy answered.
func (l *RatelimitdLimiter) Failures() int64 { return l.failures.Load() }

// Record: POST /v1/acquire.
func (l *RatelimitdLimiter) Record(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, "/v1/acquire", policy, key, cost)
}

// Check: POST /v1/peek.
func (l *RatelimitdLimiter) Check(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, "/v1/peek", policy, key, cost)
}

// Report: POST /v1/report — usage known after the fact (negative: a refund); ratelimitd checks
// the range (limits.max_cost) and refuses a concurrency policy (400).
func (l *RatelimitdLimiter) Report(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, "/v1/report", policy, key, cost)
}

// Clear: POST /v1/reset (needs ratelimitd's admin token).
func (l *RatelimitdLimiter) Clear(ctx context.Context, policy, key string) error {
	status, _, body, err := l.post(ctx, "/v1/reset", policy, key, 0, true)
	if err != nil {
		return err
	}
	if status != 200 {
		return errorOf(status, body)
	}
	return nil
}

// Describe gives the quota and window of policy, known once ratelimitd has answered for it.
func (l *RatelimitdLimiter) Describe(policy string) (PolicyInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.infos[policy]
	return p, ok
}

func (l *RatelimitdLimiter) post(ctx context.Context, path, policy, key string, cost int64, admin bool) (int, http.Header, []byte, error) {
	payload := map[string]any{"key": key, "policy": policy}
	if !admin {
		payload["cost"] = cost
	}
	b, _ := json.Marshal(payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if admin && l.o.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+l.o.AdminToken)
	}
	res, err := l.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, body, err
}

func (l *RatelimitdLimiter) decide(ctx context.Context, path, policy, key string, cost int64) (Decision, error) {
	if key == "" {
		return Decision{}, &Error{Code: "invalid_key", Message: "key must not be empty"}
	}
	status, header, body, err := l.post(ctx, path, policy, key, cost, false)
	if err == nil && status >= 500 {
		err = fmt.Errorf("ratelimitd answered %d: %s", status, body)
	}
	if err != nil {
		l.failures.Add(1)
		if l.o.OnError != nil {
			l.o.OnError(err)
		}
		info, _ := l.Describe(policy)
		return failureDecision(l.o.OnFailure, info.Quota), nil
	}
	return l.read(status, header, body)
}

// read turns one of ratelimitd's answers into a Decision (and learns the policy's quota and window).
func (l *RatelimitdLimiter) read(status int, header http.Header, body []byte) (Decision, error) {
	l.learn(header.Get("RateLimit-Policy"))
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return Decision{}, &Error{Code: "protocol", Message: fmt.Sprintf("ratelimitd answered something that is not JSON: %.200s", body)}
	}
	num := func(k string) int64 { f, _ := m[k].(float64); return int64(f) }
	if status == 400 && m["error"] == "cost_exceeds_capacity" {
		return Decision{Reason: "exceeds_capacity", Limit: num("limit")}, nil
	}
	if status == 409 && m["error"] == "policy_conflict" { // another definition of the name holds the key
		wait := time.Duration(num("retry_after_ms")) * time.Millisecond
		return Decision{Reason: "policy_conflict", RetryAfter: wait, ResetAfter: wait}, nil
	}
	if status != 200 && status != 429 {
		return Decision{}, errorOf(status, body)
	}
	allowed := m["allowed"] == true
	d := Decision{Allowed: allowed, Reason: "over_limit", Limit: num("limit"), Remaining: num("remaining"),
		ResetAfter: time.Duration(num("reset_ms")) * time.Millisecond, RetryAfter: time.Duration(num("retry_after_ms")) * time.Millisecond,
		Delay: time.Duration(num("delay_ms")) * time.Millisecond}
	if allowed {
		d.Reason = "within_limit"
	}
	return d, nil
}

// conflictAsFailure answers a policy_conflict decision as a failure (middleware.go).
func (l *RatelimitdLimiter) conflictAsFailure(policy string, d Decision) Decision {
	l.failures.Add(1)
	if l.o.OnError != nil {
		l.o.OnError(PolicyConflictError(policy, d.RetryAfter))
	}
	return failureDecision(l.o.OnFailure, d.Limit)
}

func (l *RatelimitdLimiter) learn(field string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range policyItem.FindAllStringSubmatch(field, -1) {
		name := regexp.MustCompile(`\\(.)`).ReplaceAllString(m[1], "$1")
		if old, ok := l.infos[name]; !ok || old.Quota == 0 {
			q, _ := strconv.ParseInt(m[2], 10, 64)
			w, _ := strconv.ParseInt(m[3], 10, 64)
			l.infos[name] = PolicyInfo{Name: name, Quota: q, Window: time.Duration(w) * time.Second}
		}
	}
}

func errorOf(status int, body []byte) error {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	code, _ := m["error"].(string)
	switch code {
	case "unknown_policy", "invalid_key", "invalid_cost":
	case "":
		code = "protocol"
	default:
		code = "invalid_request"
	}
	msg, _ := m["message"].(string)
	if msg == "" {
		msg = fmt.Sprintf("%.200s", body)
	}
	return &Error{Code: code, Message: fmt.Sprintf("ratelimitd answered %d: %s", status, msg)}
}
