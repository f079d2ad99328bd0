// redis_batch.go — one batch of RedisLimiter decisions on the wire: FCALL rl<version>_batch's
// keys and arguments (run_batch in src/redis/lua/multi.lua, docs/redis-functions.md), the
// library loaded first when this limiter has not seen it loaded, and loaded again once when
// Redis has lost it. The whole call has Options.Timeout as its context's deadline.
package ratelimit

import (
	"context"
	"strconv"
	"strings"
)

// call runs one FCALL rl<version>_batch (run_batch in src/redis/lua/multi.lua): the number of
// distinct policies, the clock ('-' once, or 't' and a time per item), six arguments per
// policy, then per item its policy's index, with ":<cost>:<op>" unless an acquire of 1 (a
// report's cost may be negative: a refund).
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
		if it.cost != 1 || it.op != opAcquire {
			p += ":" + strconv.FormatInt(it.cost, 10) + ":" + strconv.Itoa(it.op)
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
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if !l.loaded.Load() {
		if err := ensureLibraryEverywhere(ctx, l.redis, l.lib); err != nil {
			return nil, err
		}
		l.loaded.Store(true)
	}
	cmd := append(append([]any{l.fn, len(keys)}, keys...), args...)
	reply, err := l.redis.Do(ctx, "FCALL", cmd...)
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "function not found") {
		if err := ensureLibraryEverywhere(ctx, l.redis, l.lib); err != nil {
			return nil, err
		}
		reply, err = l.redis.Do(ctx, "FCALL", cmd...)
	}
	if err != nil {
		return nil, err
	}
	return int64sOf(reply)
}
