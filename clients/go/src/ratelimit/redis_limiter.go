// redis_limiter.go — the Redis back-end on redigo: decisions by the ratelimit function library
// (FCALL rl<version>_batch), the same keys, arguments and code as ratelimitd's Redis store, so
// both share one count. The clock is Redis' TIME (read once per batch).
//
// Batching: a decision is sent at once while fewer than MaxInFlight calls are outstanding; those
// that arrive meanwhile queue and leave together as one batch (at most 1024) when a call
// returns — one Redis call for many decisions under load, no wait at low load.
// Failures: a dial or I/O error, a timeout (Options.Timeout, default 250 ms) or an error reply
// decide by Options.OnFailure (FailOpen admits, FailClosed denies for 1 s), counted in
// Failures(); a flushed library ("Function not found") is loaded again and the batch retried
// once. Bad input returns an *Error before anything is sent; a library Redis lacks and this
// client cannot load returns an *Error with Code "library_missing".
// Thread-safety: every method may be called from any goroutine.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

const maxBatch = 1024

// Options configure a RedisLimiter.
type Options struct {
	Policies       map[string]PolicySpec // by name, as in ratelimitd's config
	KeyPrefix      string                // default "rl:" (ratelimitd's default)
	OnFailure      FailurePolicy         // default FailOpen
	Timeout        time.Duration         // dial, read and write bound (default 250 ms; URL form only)
	Library        string                // the library's text or a path (see library.go)
	LibraryVersion string                // or only the version of one already loaded
	MaxInFlight    int                   // default 2
	OnError        func(error)           // told about every failure the failure policy answered
}

type item struct {
	policy *Policy
	keys   []string
	cost   int64
	peek   bool
	nowUs  int64 // -1: the server's clock
	done   chan struct{}
	d      Decision
	err    error
}

// RedisLimiter decides through the function library.
type RedisLimiter struct {
	pool      *redis.Pool
	ownsPool  bool
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

// NewRedisLimiter connects to url (redis://host:port/db) with a pool of its own.
func NewRedisLimiter(url string, o Options) (*RedisLimiter, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 250 * time.Millisecond
	}
	pool := &redis.Pool{MaxIdle: 16, IdleTimeout: time.Minute, Dial: func() (redis.Conn, error) {
		return redis.DialURL(url, redis.DialConnectTimeout(timeout), redis.DialReadTimeout(timeout), redis.DialWriteTimeout(timeout))
	}}
	l, err := NewRedisLimiterWithPool(pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	l.ownsPool = true
	return l, nil
}

// NewRedisLimiterWithPool uses a pool the caller owns (and closes).
func NewRedisLimiterWithPool(pool *redis.Pool, o Options) (*RedisLimiter, error) {
	if len(o.Policies) == 0 {
		return nil, invalid("at least one policy is required")
	}
	l := &RedisLimiter{pool: pool, policies: map[string]*Policy{}, prefix: o.KeyPrefix, onFailure: o.OnFailure,
		onError: o.OnError, maxIn: o.MaxInFlight}
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
	if l.ownsPool {
		return l.pool.Close()
	}
	return nil
}

// Failures counts decisions the failure policy answered.
func (l *RedisLimiter) Failures() int64 { return l.failures.Load() }

// LibraryVersion is the version of the function library this limiter calls.
func (l *RedisLimiter) LibraryVersion() string { return l.lib.Version }

// Record consumes cost units of key's allowance under policy unless that would exceed it.
func (l *RedisLimiter) Record(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, false, -1)
}

// Check answers what Record would, consuming nothing.
func (l *RedisLimiter) Check(ctx context.Context, policy, key string, cost int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, true, -1)
}

// RecordAt and CheckAt decide at nowUs instead of Redis' clock: conformance tests only.
func (l *RedisLimiter) RecordAt(ctx context.Context, policy, key string, cost, nowUs int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, false, nowUs)
}
func (l *RedisLimiter) CheckAt(ctx context.Context, policy, key string, cost, nowUs int64) (Decision, error) {
	return l.decide(ctx, policy, key, cost, true, nowUs)
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
	c, err := l.pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	state := l.stateKey(p, key)
	_, err = c.Do("DEL", state, state+"#log")
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

func (l *RedisLimiter) decide(ctx context.Context, policy, key string, cost int64, peek bool, nowUs int64) (Decision, error) {
	p, err := l.policy(policy)
	if err != nil {
		return Decision{}, err
	}
	if err := validateRequest(p, key, cost); err != nil {
		return Decision{}, err
	}
	state := l.stateKey(p, key)
	keys := []string{state}
	if p.Algorithm == "sliding_window_log" {
		keys = append(keys, state+"#log")
	}
	it := &item{policy: p, keys: keys, cost: cost, peek: peek, nowUs: nowUs, done: make(chan struct{})}
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
	select {
	case <-it.done:
		return it.d, it.err
	case <-ctx.Done():
		return failureDecision(l.onFailure, p.Limit), ctx.Err()
	}
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
		n := len(l.queue)
		if n > maxBatch {
			n = maxBatch
		}
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
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
		l.failures.Add(int64(len(batch)))
		l.loaded.Store(false)
		if l.onError != nil {
			l.onError(err)
		}
		for _, it := range batch {
			it.d = failureDecision(l.onFailure, it.policy.Limit)
		}
	}
	for _, it := range batch {
		close(it.done)
	}
}

// call runs one FCALL rl<version>_batch (run_batch in src/redis/lua/multi.lua): the number of
// distinct policies, the clock ('-' once, or 't' and a time per item), six arguments per
// policy, then per item its policy's index, with ":<cost>:<op>" unless an acquire of 1.
func (l *RedisLimiter) call(batch []*item) ([]int64, error) {
	index := map[*Policy]int{}
	var policyArgs []any
	timed := false
	for _, it := range batch {
		if _, ok := index[it.policy]; !ok {
			index[it.policy] = len(index) + 1
			for _, a := range it.policy.args {
				policyArgs = append(policyArgs, a)
			}
		}
		timed = timed || it.nowUs >= 0
	}
	var keys, args []any
	clock := "-"
	if timed {
		clock = "t"
	}
	args = append(append(args, strconv.Itoa(len(index)), clock), policyArgs...)
	for _, it := range batch {
		for _, k := range it.keys {
			keys = append(keys, k)
		}
		p := strconv.Itoa(index[it.policy])
		if it.cost != 1 || it.peek {
			op := "0"
			if it.peek {
				op = "1"
			}
			p += ":" + strconv.FormatInt(it.cost, 10) + ":" + op
		}
		args = append(args, p)
		if timed {
			if it.nowUs >= 0 {
				args = append(args, strconv.FormatInt(it.nowUs, 10))
			} else {
				args = append(args, "-")
			}
		}
	}
	c := l.pool.Get()
	defer c.Close()
	if !l.loaded.Load() {
		if err := ensureLibrary(c, l.lib); err != nil {
			return nil, err
		}
		l.loaded.Store(true)
	}
	cmd := append(append([]any{l.fn, len(keys)}, keys...), args...)
	reply, err := redis.Int64s(c.Do("FCALL", cmd...))
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "function not found") {
		if err := ensureLibrary(c, l.lib); err != nil {
			return nil, err
		}
		reply, err = redis.Int64s(c.Do("FCALL", cmd...))
	}
	return reply, err
}
