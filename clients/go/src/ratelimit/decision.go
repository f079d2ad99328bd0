// decision.go — the Decision every back-end answers (ratelimitd's and the C++ library's fields),
// the package's error type, the library's reply decoding and the failure-policy decision.
// Invariants: Allowed iff Reason is "within_limit" or "failed_open"; a denial has Delay 0, an
// admission RetryAfter 0.
package ratelimit

import (
	"fmt"
	"time"
)

// Decision is what a limiter answers; a "no" is a Decision, never an error.
type Decision struct {
	Allowed    bool
	Reason     string // within_limit, over_limit, exceeds_capacity, policy_conflict, failed_open, failed_closed
	Limit      int64  // the policy's capacity
	Remaining  int64
	ResetAfter time.Duration // until the limit is fully available again
	RetryAfter time.Duration // 0 when allowed; else the shortest wait after which the request would pass
	Delay      time.Duration // shaping leaky bucket: how long to hold an admitted request
}

// Error is input to fix (Code invalid_policy, unknown_policy, invalid_key, invalid_cost), a
// library Redis lacks (library_missing), or an unreadable answer (protocol).
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return "ratelimit: " + e.Message }

// FailurePolicy: what a decision answers when the store cannot.
type FailurePolicy string

const (
	FailOpen   FailurePolicy = "open"   // admit (reason failed_open)
	FailClosed FailurePolicy = "closed" // deny for 1 s (reason failed_closed)
)

const failedClosedRetryAfter = time.Second

func failureDecision(p FailurePolicy, limit int64) Decision {
	if p == FailClosed {
		return Decision{Reason: "failed_closed", Limit: limit, RetryAfter: failedClosedRetryAfter}
	}
	return Decision{Allowed: true, Reason: "failed_open", Limit: limit}
}

// The function library's reason numbers (include/ratelimit/decision.h); "" is one a rate
// decision never answers. 6, policy_conflict: the key holds live state of another definition of
// the policy's name (another algorithm, window or counting mode); nothing was counted, and
// RetryAfter says when that state ends (docs/redis-functions.md).
var reasons = []string{"within_limit", "over_limit", "exceeds_capacity", "", "", "", "policy_conflict"}

// decodeAt: decision i of a reply of four integers per decision (reason, remaining,
// reset_after_us, delay_us when allowed else retry_after_us).
func decodeAt(reply []int64, i int, limit int64) (Decision, error) {
	if len(reply) < 4*(i+1) || reply[4*i] < 0 || reply[4*i] >= int64(len(reasons)) || reasons[reply[4*i]] == "" {
		return Decision{}, &Error{Code: "protocol", Message: fmt.Sprintf("unexpected reply from the function library: %v", reply)}
	}
	f := reply[4*i : 4*i+4]
	d := Decision{Allowed: f[0] == 0, Reason: reasons[f[0]], Limit: limit, Remaining: f[1],
		ResetAfter: time.Duration(f[2]) * time.Microsecond}
	if d.Allowed {
		d.Delay = time.Duration(f[3]) * time.Microsecond
	} else {
		d.RetryAfter = time.Duration(f[3]) * time.Microsecond
	}
	return d, nil
}

// PolicyConflictError is what a policy_conflict decision tells OnError when a middleware answers
// it by the failure policy (middleware.go): the policy whose definitions disagree, and how long
// the other one's state lives.
func PolicyConflictError(policy string, retryAfter time.Duration) *Error {
	return &Error{Code: "policy_conflict", Message: fmt.Sprintf("policy %q: the key holds live state of another "+
		"definition of this name (another algorithm, window or counting mode) for %v more; a configuration "+
		"error of the app, answered by the failure policy: give a changed definition a new name", policy, retryAfter)}
}
