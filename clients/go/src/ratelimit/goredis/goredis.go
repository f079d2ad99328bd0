// Package goredis adapts a go-redis client (github.com/redis/go-redis/v9) to ratelimit.Redis,
// so a RedisLimiter decides on the app's own go-redis client:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	limiter, err := ratelimit.NewRedisLimiterOn(goredis.New(rdb), ratelimit.Options{...})
//
// NOT COMPILED OR TESTED in this repository: go-redis is not packaged in Debian and the
// project's machines use no module proxy (clients/go/README.md). It is written to go-redis v9's
// documented API: UniversalClient.Do(ctx, args...) *Cmd, Cmd.Result() (any, error), redis.Nil
// for a nil reply, and redis.Error (an interface with RedisError()) for Redis' error replies.
// The tested adapter is ratelimit.Redigo.
// Timeouts: go-redis honours the context's deadline (the limiter's Options.Timeout) only with
// Options.ContextTimeoutEnabled; without it its own ReadTimeout applies, and the limiter still
// answers by its failure policy at Options.Timeout and drops the late reply.
// Replies: under RESP3 (go-redis v9's default protocol) FUNCTION LIST answers maps
// (map[interface{}]interface{}), which ratelimit reads as it reads RESP2's arrays.
package goredis

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"ratelimit"
)

type client struct{ c redis.UniversalClient }

// New adapts a go-redis client (*redis.Client, *redis.Ring, or any UniversalClient). Cluster
// clients are not supported by the RedisLimiter (standalone Redis only).
func New(c redis.UniversalClient) ratelimit.Redis { return client{c} }

func (a client) Do(ctx context.Context, command string, args ...any) (any, error) {
	reply, err := a.c.Do(ctx, append([]any{command}, args...)...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	var re redis.Error
	if err != nil && errors.As(err, &re) {
		return nil, ratelimit.ReplyError(re.Error())
	}
	return reply, err
}
