// usage.go — usage known after the response (docs/usage.md) on either back-end: a Reservation
// acquires an estimate before the work and reconciles it with the actual usage after (a report
// of actual − estimate: a refund when the work used less), or gives the estimate back when the
// work is abandoned (`defer res.Cancel(ctx)` after Reserve: a no-op once reconciled). The
// middleware (middleware.go, MiddlewareOptions.Usage) reconciles the same way after the handler.
// Invariant: a reservation reports at most once, and only what the store did not already count:
// the estimate counts only when the acquire recorded it (reason within_limit); after a denial or
// a failure-policy answer nothing was recorded, so Reconcile(actual) reports the whole actual
// (the work was done anyway) and Cancel sends nothing.
// Thread-safety: a Reservation may be settled from any goroutine; the first settlement wins.
package ratelimit

import (
	"context"
	"fmt"
	"sync"
)

// Reporter is what a reservation needs of a back-end (RedisLimiter and RatelimitdLimiter are).
type Reporter interface {
	Record(ctx context.Context, policy, key string, cost int64) (Decision, error)
	Report(ctx context.Context, policy, key string, cost int64) (Decision, error)
}

// RecordedBy is the units the acquire that answered d for cost recorded: cost if the store
// admitted it, else 0 (a denial, or the failure policy's answer: the store counted nothing).
func RecordedBy(d Decision, cost int64) int64 {
	if d.Reason == "within_limit" {
		return cost
	}
	return 0
}

// Reservation is an estimate acquired before the work; Decision says whether to do the work.
type Reservation struct {
	Policy, Key string
	Estimate    int64
	Decision    Decision

	l       Reporter
	mu      sync.Mutex
	settled bool
	result  *Decision
	err     error
}

// Reserve acquires estimate units of key under policy on l.
func Reserve(ctx context.Context, l Reporter, policy, key string, estimate int64) (*Reservation, error) {
	d, err := l.Record(ctx, policy, key, estimate)
	if err != nil {
		return nil, err
	}
	return &Reservation{Policy: policy, Key: key, Estimate: estimate, Decision: d, l: l}, nil
}

// Reconcile reports the work's actual usage: actual − what the acquire recorded (negative: a
// refund). It answers the report's decision, or nil when there was nothing to report; an *Error
// invalid_request once the reservation is settled, invalid_cost for a negative actual.
func (r *Reservation) Reconcile(ctx context.Context, actual int64) (*Decision, error) {
	if actual < 0 {
		return nil, &Error{Code: "invalid_cost", Message: fmt.Sprintf("actual usage must not be negative, got %d", actual)}
	}
	return r.settle(ctx, actual, false)
}

// Cancel gives the recorded estimate back (the work was abandoned; nothing is sent when nothing
// was recorded). Once settled it does nothing and answers the first settlement.
func (r *Reservation) Cancel(ctx context.Context) (*Decision, error) {
	return r.settle(ctx, 0, true)
}

func (r *Reservation) settle(ctx context.Context, actual int64, cancel bool) (*Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		if cancel {
			return r.result, r.err
		}
		return nil, &Error{Code: "invalid_request", Message: fmt.Sprintf("reservation for %q under %q is already settled", r.Key, r.Policy)}
	}
	r.settled = true
	if delta := actual - RecordedBy(r.Decision, r.Estimate); delta != 0 {
		d, err := r.l.Report(ctx, r.Policy, r.Key, delta)
		r.result, r.err = &d, err
	}
	return r.result, r.err
}

// Reserve acquires estimate units now, to reconcile with the actual usage after the work.
func (l *RedisLimiter) Reserve(ctx context.Context, policy, key string, estimate int64) (*Reservation, error) {
	return Reserve(ctx, l, policy, key, estimate)
}

// Reserve acquires estimate units now, to reconcile with the actual usage after the work.
func (l *RatelimitdLimiter) Reserve(ctx context.Context, policy, key string, estimate int64) (*Reservation, error) {
	return Reserve(ctx, l, policy, key, estimate)
}
