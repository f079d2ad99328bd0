// redis_client.go — the little of a Redis client that RedisLimiter uses (Redis: one command, its
// reply), and the adapter on redigo, the client this package is tested with. Another client
// plugs in by implementing Redis: goredis/ holds one for go-redis (not compiled here: go-redis
// is not packaged in Debian, see goredis/goredis.go).
// Replies are RESP's, as plain Go values: int64, string or []byte, []any (RESP3 maps may come as
// map[any]any or map[string]any), nil. An error reply from Redis is a ReplyError; any other
// error is the connection's, an outage the failure policy answers.
// Thread-safety: an implementation must allow Do from many goroutines at once.
package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Redis sends one command and returns its reply. ctx carries the deadline the limiter allows
// (Options.Timeout); an implementation should give up by then.
type Redis interface {
	Do(ctx context.Context, command string, args ...any) (any, error)
}

// ReplyError is an error reply from Redis ("ERR ...", "NOSCRIPT ..."): Redis answered.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

type redigoPool struct{ pool *redis.Pool }

// Redigo adapts a redigo pool. Each Do takes a connection from the pool and reads its reply
// within ctx's deadline (redigo's DoWithTimeout); the pool's own dial and write timeouts apply.
func Redigo(pool *redis.Pool) Redis { return redigoPool{pool} }

func (r redigoPool) Do(ctx context.Context, command string, args ...any) (any, error) {
	c, err := r.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var reply any
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		reply, err = redis.DoWithTimeout(c, left, command, args...)
	} else {
		reply, err = c.Do(command, args...)
	}
	if e, ok := err.(redis.Error); ok {
		return nil, ReplyError(e)
	}
	return reply, err
}

// int64sOf reads an array of integers (FCALL rl<version>_batch's answer).
func int64sOf(reply any) ([]int64, error) {
	items, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("ratelimit: expected an array of integers, got %T", reply)
	}
	out := make([]int64, len(items))
	for i, v := range items {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("ratelimit: expected an integer at %d, got %T", i, v)
		}
		out[i] = n
	}
	return out, nil
}

// textOf reads a simple or bulk string.
func textOf(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// libraryNames reads FUNCTION LIST's answer: per library, field/value pairs (RESP2) or a map
// (RESP3), of which library_name.
func libraryNames(reply any) []string {
	entries, _ := reply.([]any)
	var names []string
	for _, entry := range entries {
		switch e := entry.(type) {
		case []any:
			for i := 0; i+1 < len(e); i += 2 {
				if k, _ := textOf(e[i]); k == "library_name" {
					if v, ok := textOf(e[i+1]); ok {
						names = append(names, v)
					}
				}
			}
		case map[any]any:
			if v, ok := textOf(e["library_name"]); ok {
				names = append(names, v)
			}
		case map[string]any:
			if v, ok := textOf(e["library_name"]); ok {
				names = append(names, v)
			}
		}
	}
	return names
}
