// leases.go — concurrency leases through ratelimitd (docs/throttling.md), as the Node and Python
// clients have them: POST /v1/leases takes Cost units of a concurrency policy, DELETE
// /v1/leases/{id} gives them back with the work's outcome and latency (which an adaptive limit
// learns from), POST /v1/leases/{id}/renew extends one.
// Input ratelimitd would refuse (empty key or policy, cost < 1, an unknown outcome, a latency
// that is negative, NaN or an hour or more) returns an *Error before anything is sent;
// ratelimitd's own 4xx codes come back as an *Error with its code. No answer within Timeout, a
// refused connection or a 5xx is answered by OnFailure, as on the rate path: FailOpen grants a
// Lease without an ID (the work proceeds unprotected; releasing it sends nothing), FailClosed
// refuses (reason failed_closed, retry after 1 s). ratelimitd's own store failing open answers
// a grant with "lease_id": null: the same Lease without an ID, reason failed_open (it was a
// protocol error and so a 500 in the middleware). ReleaseLease never fails for an unreachable
// ratelimitd (it answers false: the lease lapses at its TTL), so a defer can call it.
// Thread-safety: every method may be called from any goroutine.
package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// MaxLatency is ratelimitd's bound on a release's latency (src/server/api/request.cc).
const MaxLatency = time.Hour

// Lease is a granted lease (Allowed) or a refusal; a grant without an ID is the failure policy's.
type Lease struct {
	Allowed    bool
	Reason     string // within_limit, over_limit, exceeds_capacity, failed_open, failed_closed, policy_conflict
	ID         string
	Policy     string
	Key        string
	Limit      int64
	Remaining  int64
	Expires    time.Duration // until it lapses unless renewed (granted)
	RetryAfter time.Duration // the shortest wait before the same request could be granted (refused)
	// ratelimitd's RateLimit-Policy and RateLimit fields, sent on by the middleware.
	RateLimitPolicy, RateLimit string
}

// LeaseOptions of AcquireLease: Priority (a class name, sent as `priority`) and MaxWait (> 0:
// wait up to that long for a unit, ratelimitd's `max_wait_ms`).
type LeaseOptions struct {
	Priority string
	MaxWait  time.Duration
}

// Outcome of the work a lease covered: "ok", "dropped", "timeout", or "" (none: ratelimitd takes
// grant-to-release as the round trip). Latency 0 sends none.
type Outcome struct {
	Outcome string
	Latency time.Duration
}

func (l *RatelimitdLimiter) leaseCall(ctx context.Context, method, path string, payload any) (int, http.Header, map[string]any, error) {
	var body io.Reader
	if payload != nil {
		b, _ := json.Marshal(payload)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.base+path, body)
	if err != nil {
		return 0, nil, nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := l.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	if res.StatusCode >= 500 {
		return 0, nil, nil, fmt.Errorf("ratelimitd answered %d: %.200s", res.StatusCode, raw)
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return 0, nil, nil, &Error{Code: "protocol", Message: fmt.Sprintf("ratelimitd answered something that is not JSON: %.200s", raw)}
	}
	return res.StatusCode, res.Header, m, nil
}

// failed counts an unreachable ratelimitd and tells OnError; true when err is one (a protocol
// *Error is not: it is returned as it is).
func (l *RatelimitdLimiter) failed(err error) bool {
	if e, ok := err.(*Error); ok && e.Code == "protocol" {
		return false
	}
	l.failures.Add(1)
	if l.o.OnError != nil {
		l.o.OnError(err)
	}
	return true
}

func leaseError(status int, m map[string]any) error {
	code, _ := m["error"].(string)
	msg, _ := m["message"].(string)
	if code == "" {
		code = "protocol"
	}
	return &Error{Code: code, Message: fmt.Sprintf("ratelimitd answered %d: %s", status, msg)}
}

// AcquireLease: POST /v1/leases.
func (l *RatelimitdLimiter) AcquireLease(ctx context.Context, policy, key string, cost int64, o LeaseOptions) (Lease, error) {
	switch {
	case policy == "":
		return Lease{}, invalid("policy must not be empty")
	case key == "":
		return Lease{}, &Error{Code: "invalid_key", Message: "key must not be empty"}
	case cost < 1:
		return Lease{}, &Error{Code: "invalid_cost", Message: fmt.Sprintf("cost must be at least 1, got %d", cost)}
	case o.MaxWait < 0:
		return Lease{}, &Error{Code: "invalid_max_wait", Message: "MaxWait must not be negative"}
	}
	payload := map[string]any{"key": key, "policy": policy, "cost": cost}
	if o.Priority != "" {
		payload["priority"] = o.Priority
	}
	if o.MaxWait > 0 {
		payload["max_wait_ms"] = o.MaxWait.Milliseconds()
	}
	status, header, m, err := l.leaseCall(ctx, http.MethodPost, "/v1/leases", payload)
	if err != nil {
		if !l.failed(err) {
			return Lease{}, err
		}
		return l.failureLease(policy, key), nil
	}
	num := func(k string) int64 { f, _ := m[k].(float64); return int64(f) }
	lease := Lease{Reason: "over_limit", Policy: policy, Key: key, Limit: num("limit"),
		RateLimitPolicy: header.Get("RateLimit-Policy"), RateLimit: header.Get("RateLimit")}
	switch {
	case status == 400 && m["error"] == "cost_exceeds_capacity":
		lease.Reason = "exceeds_capacity"
		return lease, nil
	case status == 409 && m["error"] == "policy_conflict": // another definition of the name holds the key
		lease.Reason = "policy_conflict"
		lease.RetryAfter = time.Duration(num("retry_after_ms")) * time.Millisecond
		return lease, nil
	case status != 200 && status != 429:
		return Lease{}, leaseError(status, m)
	}
	lease.Remaining = num("remaining")
	if status == 429 {
		lease.RetryAfter = time.Duration(num("retry_after_ms")) * time.Millisecond
		return lease, nil
	}
	if v, present := m["lease_id"]; present && v == nil {
		// ratelimitd's own store failed and its failure policy admitted: a grant with nothing to
		// release or renew (the same Lease as this client's failed_open).
		lease.Allowed, lease.Reason = true, "failed_open"
		lease.Expires = time.Duration(num("expires_ms")) * time.Millisecond
		return lease, nil
	}
	id, ok := m["lease_id"].(string)
	if !ok {
		return Lease{}, &Error{Code: "protocol", Message: "a granted lease without a lease_id"}
	}
	lease.Allowed, lease.Reason, lease.ID = true, "within_limit", id
	lease.Expires = time.Duration(num("expires_ms")) * time.Millisecond
	return lease, nil
}

// failureLease: the failure policy's Lease (FailOpen: a grant without an ID, nothing to
// release; FailClosed: refused, retry after 1 s).
func (l *RatelimitdLimiter) failureLease(policy, key string) Lease {
	if l.o.OnFailure == FailClosed {
		return Lease{Reason: "failed_closed", Policy: policy, Key: key, RetryAfter: time.Second}
	}
	return Lease{Allowed: true, Reason: "failed_open", Policy: policy, Key: key}
}

func leasePath(lease Lease, tail string) string {
	return "/v1/leases/" + url.PathEscape(lease.ID) + tail
}

// ReleaseLease: DELETE /v1/leases/{id} with the outcome; false when nothing was released (a
// refusal, the failure policy's lease, an unreachable ratelimitd, a lease already gone).
func (l *RatelimitdLimiter) ReleaseLease(ctx context.Context, lease Lease, o Outcome) (bool, error) {
	switch o.Outcome {
	case "", "ok", "dropped", "timeout":
	default:
		return false, &Error{Code: "invalid_outcome", Message: fmt.Sprintf("outcome must be ok, dropped or timeout, got %q", o.Outcome)}
	}
	if o.Latency < 0 || o.Latency >= MaxLatency {
		return false, &Error{Code: "invalid_latency", Message: fmt.Sprintf("latency must be 0 or more and under an hour, got %v", o.Latency)}
	}
	if !lease.Allowed || lease.ID == "" {
		return false, nil
	}
	var payload any // no body without an outcome (a nil map would be sent as null, which ratelimitd refuses)
	if o.Outcome != "" || o.Latency > 0 {
		m := map[string]any{}
		if o.Outcome != "" {
			m["outcome"] = o.Outcome
		}
		if o.Latency > 0 {
			m["latency_ms"] = float64(o.Latency) / float64(time.Millisecond)
		}
		payload = m
	}
	status, _, m, err := l.leaseCall(ctx, http.MethodDelete, leasePath(lease, ""), payload)
	if err != nil {
		if l.failed(err) {
			return false, nil
		}
		return false, err
	}
	if status == 409 && m["error"] == "policy_conflict" { // nothing released: the key now holds another definition's state
		if l.o.OnError != nil {
			f, _ := m["retry_after_ms"].(float64)
			l.o.OnError(PolicyConflictError(lease.Policy, time.Duration(f)*time.Millisecond))
		}
		return false, nil
	}
	if status != 200 {
		return false, leaseError(status, m)
	}
	return m["released"] == true, nil
}

// RenewLease: POST /v1/leases/{id}/renew; false when the lease is no longer held. Unreachable:
// true under FailOpen (the work goes on), false under FailClosed.
func (l *RatelimitdLimiter) RenewLease(ctx context.Context, lease *Lease) (bool, error) {
	if !lease.Allowed || lease.ID == "" {
		return lease.Allowed, nil
	}
	status, _, m, err := l.leaseCall(ctx, http.MethodPost, leasePath(*lease, "/renew"), nil)
	if err != nil {
		if l.failed(err) {
			return l.o.OnFailure != FailClosed, nil
		}
		return false, err
	}
	if status == 404 && m["error"] == "lease_not_held" {
		return false, nil
	}
	if status == 409 && m["error"] == "policy_conflict" { // not held: the key now holds another definition's state
		lease.Reason = "policy_conflict"
		return false, nil
	}
	if status != 200 {
		return false, leaseError(status, m)
	}
	if f, ok := m["expires_ms"].(float64); ok {
		lease.Expires = time.Duration(f) * time.Millisecond
	}
	return m["renewed"] == true, nil
}
