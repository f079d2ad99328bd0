// redis_limiter.go — the Redis back-end: decisions by the ratelimit function library
// (FCALL rl<version>_batch), the same keys, arguments and code as ratelimitd's Redis store, so
// both share one count. The clock is Redis' TIME (read once per batch). Redis is reached through
// the Redis interface (redis_client.go): redigo by default, or the app's own client.
//
// Batching: a decision is sent at once while fewer than MaxInFlight calls are outstanding; those
// that arrive meanwhile queue and leave together as one batch (at most 1024) when a call
// returns — one Redis call for many decisions under load, no wait at low load.
// Failures: a dial or I/O error, a timeout or an error reply decide by Options.OnFailure
// (FailOpen admits, FailClosed denies for 1 s), counted in Failures(); a flushed library
// ("Function not found") is loaded again and the batch retried once. Bad input returns an
// *Error before anything is sent; a library Redis lacks and this client cannot load returns an
// *Error with Code "library_missing".
// Timeout (Options.Timeout, default 250 ms) bounds each decision, queue included, whatever the
// client does: a Redis call gets it as its context's deadline, and a caller still waiting then
// is answered by the failure policy (a client ignoring the deadline cannot hold it longer; its
// late answer is dropped, not counted twice).
// Report is op 4 of the same batch (usage known after the fact): recorded even past the limit,
// a negative cost gives units back; a failed report answers the failure policy's decision
// (reason failed_open / failed_closed: nothing was recorded).
// Thread-safety: every method may be called from any goroutine.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

const maxBatch = 1024

// The library's ops (docs/redis-functions.md).
const (
	opAcquire = 0
	opPeek    = 1
	opReport  = 4
)

// An item's state: the batch answers it (decided) unless its caller stopped waiting first.
const (
	pending int32 = iota
	decided
	abandoned
)

// Options configure a RedisLimiter.
type Options struct {
	Policies       map[string]PolicySpec // by name, as in ratelimitd's config
	KeyPrefix      string                // default "rl:" (ratelimitd's default)
	OnFailure      FailurePolicy         // default FailOpen
	Timeout        time.Duration         // bound on each decision (default 250 ms); the URL form dials with it
	Library        string                // the library's text or a path (see library.go)
	LibraryVersion string                // or only the version of one already loaded
	MaxInFlight    int                   // default 2
	OnError        func(error)           // told about every failure the failure policy answered
}

type item struct {
	policy *Policy
	keys   []string
	cost   int64
	op     int   // opAcquire, opPeek, opReport
	nowUs  int64 // -1: the server's clock
	done   chan struct{}
	state  atomic.Int32
	d      Decision
	err    error
}

// RedisLimiter decides through the function library.
type RedisLimiter struct {
	redis     Redis
	closePool func() error // set when the limiter made the pool
	timeout   time.Duration
	policies  map[string]*Policy
	prefix    string
	onFailure FailurePolicy
	onError   func(error)
	lib       Library
	fn        string
	maxIn     int
	failures  atomic.Int64
	loaded    atomic.Bool

	mu       sync.Mutex
	queue    []*item
	inFlight int
}

// NewRedisLimiter connects to url (redis://host:port/db) with a pool of its own, or to a Redis
// Cluster (redis-cluster://host:port,host:port, ratelimitd's form) with a RedigoCluster.
func NewRedisLimiter(url string, o Options) (*RedisLimiter, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 250 * time.Millisecond
	}
	if strings.HasPrefix(url, "redis-cluster://") {
		seeds, base, err := clusterSeeds(url)
		if err != nil {
			return nil, err
		}
		cluster := NewRedigoCluster(seeds, func(addr string) (redis.Conn, error) {
			return redis.DialURL(base+addr, redis.DialConnectTimeout(timeout), redis.DialReadTimeout(timeout), redis.DialWriteTimeout(timeout))
		})
		l, err := NewRedisLimiterOn(cluster, o)
		if err != nil {
			return nil, err
		}
		l.closePool = cluster.Close
		return l, nil
	}
	pool := &redis.Pool{MaxIdle: 16, IdleTimeout: time.Minute, Dial: func() (redis.Conn, error) {
		return redis.DialURL(url, redis.DialConnectTimeout(timeout), redis.DialReadTimeout(timeout), redis.DialWriteTimeout(timeout))
	}}
	l, err := NewRedisLimiterOn(Redigo(pool), o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	l.closePool = pool.Close
	return l, nil
}

// NewRedisLimiterWithPool uses a redigo pool the caller owns (and closes).
func NewRedisLimiterWithPool(pool *redis.Pool, o Options) (*RedisLimiter, error) {
	return NewRedisLimiterOn(Redigo(pool), o)
}

// NewRedisLimiterOn uses any Redis client through the Redis interface (Redigo(pool), the
// goredis adapter, one's own); the caller owns and closes it.
func NewRedisLimiterOn(r Redis, o Options) (*RedisLimiter, error) {
	if r == nil {
		return nil, invalid("a Redis client is required")
	}
	if len(o.Policies) == 0 {
		return nil, invalid("at least one policy is required")
	}
	l := &RedisLimiter{redis: r, policies: map[string]*Policy{}, prefix: o.KeyPrefix, onFailure: o.OnFailure,
		onError: o.OnError, maxIn: o.MaxInFlight, timeout: o.Timeout}
	if l.timeout <= 0 {
		l.timeout = 250 * time.Millisecond
	}
	for name, spec := range o.Policies {
		p, err := NewPolicy(name, spec)
		if err != nil {
			return nil, err
		}
		l.policies[name] = &p
	}
	if l.prefix == "" {
		l.prefix = "rl:"
	}
	if strings.ContainsAny(l.prefix, "{}") || len(l.prefix) > 128 {
		return nil, invalid("KeyPrefix must be at most 128 bytes, without { or }")
	}
	if l.onFailure == "" {
		l.onFailure = FailOpen
	}
	if l.onFailure != FailOpen && l.onFailure != FailClosed {
		return nil, invalid("OnFailure must be FailOpen or FailClosed, got %q", l.onFailure)
	}
	if l.maxIn <= 0 {
		l.maxIn = 2
	}
	lib, err := FindLibrary(o.Library, o.LibraryVersion)
	if err != nil {
		return nil, err
	}
	l.lib, l.fn = lib, "rl"+lib.Version+"_batch"
	return l, nil
}

// Close closes the pool if the limiter made it.
func (l *RedisLimiter) Close() error {
	if l.closePool != nil {
		return l.closePool()
	}
	return nil
}

// Failures counts decisions the failure policy answered.
func (l *RedisLimiter) Failures() int64 { return l.failures.Load() }

// LibraryVersion is the version of the function library this limiter calls.
func (l *RedisLimiter) LibraryVersion() string { return l.lib.Version }

// Record consumes cost units of key's allowance under policy unless that would exceed it.
func (l *RedisLimiter) Record(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, opAcquire, -1)
}

// Check answers what Record would, consuming nothing.
func (l *RedisLimiter) Check(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, opPeek, -1)
}

// Report records usage known after the fact (docs/usage.md): cost units even past the limit
// (the key is then in debt: Record is refused until the algorithm repays it), or, negative, a
// refund; 0 records nothing. Always allowed, with what is left now.
func (l *RedisLimiter) Report(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, opReport, -1)
}

// RecordAt, CheckAt and ReportAt decide at nowUs instead of Redis' clock: conformance tests only.
func (l *RedisLimiter) RecordAt(ctx context.Context, policy, key string, cost, nowUs int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, opAcquire, nowUs)
}
func (l *RedisLimiter) CheckAt(ctx context.Context, policy, key string, cost, nowUs int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, opPeek, nowUs)
}
func (l *RedisLimiter) ReportAt(ctx context.Context, policy, key string, cost, nowUs int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, opReport, nowUs)
}

// Clear forgets key's state under policy.
func (l *RedisLimiter) Clear(ctx context.Context, policy, key string) error {
	p, err := l.policy(policy)
	if err != nil {
		return err
	}
	if err := validateRequest(p, key, 1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	state := l.stateKey(p, key)
	_, err = l.redis.Do(ctx, "DEL", state, state+"#log")
	return err
}

// Describe gives the quota and window RateLimit-Policy shows for policy.
func (l *RedisLimiter) Describe(policy string) (PolicyInfo, bool) {
	p, ok := l.policies[policy]
	if !ok {
		return PolicyInfo{}, false
	}
	return PolicyInfo{Name: p.Name, Quota: p.Limit, Window: time.Duration(p.WindowUs) * time.Microsecond}, true
}

func (l *RedisLimiter) policy(name string) (*Policy, error) {
	p, ok := l.policies[name]
	if !ok {
		names := make([]string, 0, len(l.policies))
		for n := range l.policies {
			names = append(names, n)
		}
		return nil, &Error{Code: "unknown_policy", Message: fmt.Sprintf("unknown policy %q (configured: %s)", name, strings.Join(names, ", "))}
	}
	return p, nil
}

// EscapeKey: '%' -> %25, '{' -> %7B, '}' -> %7D, so no user key can leave its hash tag.
func EscapeKey(key string) string {
	return strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(key)
}

func (l *RedisLimiter) stateKey(p *Policy, key string) string {
	return l.prefix + "{" + EscapeKey(key) + "}:" + p.Name
}

func (l *RedisLimiter) decide(ctx context.Context, policy, key string, cost int64, op int, nowUs int64) (Decision, error) {
	p, err := l.policy(policy)
	if err != nil {
		return Decision{}, err
	}
	validate := validateRequest
	if op == opReport {
		validate = validateReport
	}
	if err := validate(p, key, cost); err != nil {
		return Decision{}, err
	}
	state := l.stateKey(p, key)
	keys := []string{state}
	if p.Algorithm == "sliding_window_log" {
		keys = append(keys, state+"#log")
	}
	it := &item{policy: p, keys: keys, cost: cost, op: op, nowUs: nowUs, done: make(chan struct{})}
	l.mu.Lock()
	l.queue = append(l.queue, it)
	start := l.inFlight < l.maxIn
	if start {
		l.inFlight++
	}
	l.mu.Unlock()
	if start {
		go l.drain()
	}
	timer := time.NewTimer(l.timeout)
	defer timer.Stop()
	select {
	case <-it.done:
		return it.d, it.err
	case <-ctx.Done():
		if it.state.CompareAndSwap(pending, abandoned) {
			return failureDecision(l.onFailure, p.Limit), ctx.Err()
		}
	case <-timer.C:
		if it.state.CompareAndSwap(pending, abandoned) {
			l.failed(1, fmt.Errorf("ratelimit: no answer from Redis within %v", l.timeout))
			return failureDecision(l.onFailure, p.Limit), nil
		}
	}
	<-it.done // the batch claimed it first: its answer is a moment away
	return it.d, it.err
}

// failed counts n decisions the failure policy answered and reports err.
func (l *RedisLimiter) failed(n int, err error) {
	l.failures.Add(int64(n))
	if l.onError != nil {
		l.onError(err)
	}
}

// conflictAsFailure answers a policy_conflict decision as a failure (middleware.go).
func (l *RedisLimiter) conflictAsFailure(policy string, d Decision) Decision {
	l.failed(1, PolicyConflictError(policy, d.RetryAfter))
	return failureDecision(l.onFailure, d.Limit)
}

// drain sends what is queued, batch after batch, until the queue is empty.
func (l *RedisLimiter) drain() {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.inFlight--
			l.mu.Unlock()
			return
		}
		var batch []*item
		if _, cluster := l.redis.(clusterRedis); cluster {
			batch, l.queue = cutBySlot(l.queue, maxBatch)
		} else {
			n := len(l.queue)
			if n > maxBatch {
				n = maxBatch
			}
			batch, l.queue = l.queue[:n:n], l.queue[n:]
		}
		l.mu.Unlock()
		l.send(batch)
	}
}

func (l *RedisLimiter) send(batch []*item) {
	reply, err := l.call(batch)
	decisions := make([]Decision, 0, len(batch))
	for i := 0; err == nil && i < len(batch); i++ {
		var d Decision
		if d, err = decodeAt(reply, i, batch[i].policy.Limit); err == nil {
			decisions = append(decisions, d)
		}
	}
	var live []*item // those whose callers still wait
	for _, it := range batch {
		if it.state.CompareAndSwap(pending, decided) {
			live = append(live, it)
		}
	}
	var lm *Error
	switch {
	case err == nil:
		for i, it := range batch {
			it.d = decisions[i]
		}
	case errors.As(err, &lm) && lm.Code == "library_missing":
		for _, it := range batch { // a deployment error, not an outage: no failure policy hides it
			it.err = err
		}
	default:
		l.loaded.Store(false)
		if len(live) > 0 {
			l.failed(len(live), err)
		}
		for _, it := range batch {
			it.d = failureDecision(l.onFailure, it.policy.Limit)
		}
	}
	for _, it := range batch {
		close(it.done)
	}
}
