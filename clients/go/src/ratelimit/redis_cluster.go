// redis_cluster.go — RedisLimiter on Redis Cluster (issue 31): a Redis (redis_client.go) that
// routes each command to the master owning its key's hash slot, on redigo pools, one per node,
// since redigo has no cluster client of its own; and what the limiter needs to use it.
// Why: one FCALL may touch keys of one slot only, and every state key is `prefix{key}:policy` (a
// sliding log's second key `...#log` has the same tag), so RedisLimiter cuts its batches per
// slot (slotOf) and this client sends each to its slot's master. A slot migrating answers MOVED
// (the slot map is read again, the command goes to the new owner) or ASK (ASKING then the
// command, on the target, once) or TRYAGAIN (a short pause, again), so a migration under load
// keeps the count exact. The function library lives on each master (FUNCTION LOAD is not
// routed by key): Masters() gives each one for ensureLibrary.
// Invariants: slotOf matches CLUSTER KEYSLOT (cluster_test.go checks it on a real cluster); a
// command follows at most maxRedirects redirections within its context's deadline; the slot map
// is replaced whole under mu, never edited in place.
// Thread-safety: Do and Masters may be called from many goroutines at once.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

const (
	clusterSlots = 16384
	maxRedirects = 16
)

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for k := 0; k < 8; k++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return
}()

// slotOf is the hash slot of key: CRC16/XMODEM of the text between its first '{' and the next
// '}' when that is not empty, else of the whole key, mod 16384.
func slotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if close := strings.IndexByte(key[open+1:], '}'); close > 0 {
			key = key[open+1 : open+1+close]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return int(crc) % clusterSlots
}

// clusterRedis is a Redis whose batches must hold one slot (RedisLimiter cuts them) and whose
// library must be on every master.
type clusterRedis interface {
	Redis
	Masters(ctx context.Context) ([]Redis, error)
}

// RedigoCluster is a Redis Cluster client on redigo: a pool per node, the slot map from CLUSTER
// SLOTS (read at the first command, and again after each MOVED).
type RedigoCluster struct {
	seeds []string
	dial  func(addr string) (redis.Conn, error)
	mu    sync.Mutex
	pools map[string]*redis.Pool
	slots []string // slot -> master address; nil until read
}

// NewRedigoCluster makes a cluster client from seed addresses (host:port), dialing each node
// with dial (nil: redis.Dial("tcp", addr)). Nothing is dialed until the first command.
func NewRedigoCluster(seeds []string, dial func(addr string) (redis.Conn, error)) *RedigoCluster {
	if dial == nil {
		dial = func(addr string) (redis.Conn, error) { return redis.Dial("tcp", addr) }
	}
	return &RedigoCluster{seeds: seeds, dial: dial, pools: map[string]*redis.Pool{}}
}

func (c *RedigoCluster) rawPool(addr string) *redis.Pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[addr]
	if !ok {
		p = &redis.Pool{MaxIdle: 16, IdleTimeout: time.Minute, Dial: func() (redis.Conn, error) { return c.dial(addr) }}
		c.pools[addr] = p
	}
	return p
}

func (c *RedigoCluster) pool(addr string) Redis { return redigoPool{c.rawPool(addr)} }

// refresh reads the slot map from the first seed or known node that answers CLUSTER SLOTS.
func (c *RedigoCluster) refresh(ctx context.Context) error {
	c.mu.Lock()
	candidates := append([]string{}, c.seeds...)
	for addr := range c.pools {
		candidates = append(candidates, addr)
	}
	c.mu.Unlock()
	var last error = errors.New("ratelimit: no Redis Cluster seed given")
	for _, addr := range candidates {
		reply, err := c.pool(addr).Do(ctx, "CLUSTER", "SLOTS")
		if err != nil {
			last = err
			continue
		}
		slots := make([]string, clusterSlots)
		ranges, _ := reply.([]any)
		for _, r := range ranges {
			f, _ := r.([]any)
			if len(f) < 3 {
				continue
			}
			lo, _ := f[0].(int64)
			hi, _ := f[1].(int64)
			node, _ := f[2].([]any)
			if len(node) < 2 || lo < 0 || hi >= clusterSlots {
				continue
			}
			host, _ := textOf(node[0])
			port, _ := node[1].(int64)
			if host == "" {
				host = strings.SplitN(addr, ":", 2)[0]
			}
			for s := lo; s <= hi; s++ {
				slots[s] = fmt.Sprintf("%s:%d", host, port)
			}
		}
		c.mu.Lock()
		c.slots = slots
		c.mu.Unlock()
		return nil
	}
	return last
}

func (c *RedigoCluster) owner(ctx context.Context, slot int) (string, error) {
	c.mu.Lock()
	slots := c.slots
	c.mu.Unlock()
	if slots == nil {
		if err := c.refresh(ctx); err != nil {
			return "", err
		}
		c.mu.Lock()
		slots = c.slots
		c.mu.Unlock()
	}
	if slots[slot] == "" {
		return "", fmt.Errorf("ratelimit: no Redis Cluster master serves slot %d", slot)
	}
	return slots[slot], nil
}

// keyOf is the key a command is routed by: FCALL's first key, else its first argument.
func keyOf(command string, args []any) (string, bool) {
	i := 0
	if strings.EqualFold(command, "FCALL") || strings.EqualFold(command, "FCALL_RO") {
		i = 2
	}
	if len(args) <= i {
		return "", false
	}
	switch k := args[i].(type) {
	case string:
		return k, true
	case []byte:
		return string(k), true
	}
	return fmt.Sprint(args[i]), true
}

// Do sends the command to the master of its key's slot, following MOVED, ASK and TRYAGAIN.
func (c *RedigoCluster) Do(ctx context.Context, command string, args ...any) (any, error) {
	key, ok := keyOf(command, args)
	if !ok {
		return nil, fmt.Errorf("ratelimit: %s has no key to route it by on a Redis Cluster", command)
	}
	addr, err := c.owner(ctx, slotOf(key))
	if err != nil {
		return nil, err
	}
	asking := false
	for i := 0; ; i++ {
		var reply any
		if asking {
			reply, err = c.askingDo(ctx, addr, command, args)
		} else {
			reply, err = c.pool(addr).Do(ctx, command, args...)
		}
		var re ReplyError
		if !errors.As(err, &re) || i >= maxRedirects {
			return reply, err
		}
		msg := string(re)
		switch {
		case strings.HasPrefix(msg, "MOVED "):
			if f := strings.Fields(msg); len(f) == 3 {
				addr, asking = f[2], false
				_ = c.refresh(ctx) // the whole map may have moved; this answer holds regardless
				continue
			}
		case strings.HasPrefix(msg, "ASK "):
			if f := strings.Fields(msg); len(f) == 3 {
				addr, asking = f[2], true
				continue
			}
		case strings.HasPrefix(msg, "TRYAGAIN"):
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		return reply, err
	}
}

// askingDo sends ASKING then the command on one connection of addr's pool, within ctx.
func (c *RedigoCluster) askingDo(ctx context.Context, addr, command string, args []any) (any, error) {
	conn, err := c.rawPool(addr).GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	left := time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		if left = time.Until(deadline); left <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	if _, err := redis.DoWithTimeout(conn, left, "ASKING"); err != nil {
		return nil, err
	}
	reply, err := redis.DoWithTimeout(conn, left, command, args...)
	if e, ok := err.(redis.Error); ok {
		return nil, ReplyError(e)
	}
	return reply, err
}

// Masters is a Redis for each master in the slot map (read now).
func (c *RedigoCluster) Masters(ctx context.Context) ([]Redis, error) {
	if err := c.refresh(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	seen := map[string]bool{}
	var addrs []string
	for _, a := range c.slots {
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	c.mu.Unlock()
	out := make([]Redis, len(addrs))
	for i, a := range addrs {
		out[i] = c.pool(a)
	}
	return out, nil
}

// Close closes every node's pool.
func (c *RedigoCluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.Close()
	}
	c.pools = map[string]*redis.Pool{}
	return nil
}

// cutBySlot takes up to n of queue whose first key's slot is the first item's (one FCALL, one
// slot), in order, and returns them and the rest.
func cutBySlot(queue []*item, n int) (batch, rest []*item) {
	slot := slotOf(queue[0].keys[0])
	for _, it := range queue {
		if len(batch) < n && slotOf(it.keys[0]) == slot {
			batch = append(batch, it)
		} else {
			rest = append(rest, it)
		}
	}
	return batch, rest
}

// ensureLibraryEverywhere is ensureLibrary on r, or on each of its masters when r is a cluster.
func ensureLibraryEverywhere(ctx context.Context, r Redis, lib Library) error {
	cl, ok := r.(clusterRedis)
	if !ok {
		return ensureLibrary(ctx, r, lib)
	}
	masters, err := cl.Masters(ctx)
	if err != nil {
		return err
	}
	for _, m := range masters {
		if err := ensureLibrary(ctx, m, lib); err != nil {
			return err
		}
	}
	return nil
}

// clusterSeeds reads redis-cluster://[user:password@]host:port[,host:port...][/db]: the seeds
// and the URL each node is dialed with (redis://[user:password@]host:port).
func clusterSeeds(url string) ([]string, string, error) {
	rest := strings.TrimPrefix(url, "redis-cluster://")
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	auth := ""
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		auth, rest = rest[:i+1], rest[i+1:]
	}
	var seeds []string
	for _, hp := range strings.Split(rest, ",") {
		if hp == "" || strings.Count(hp, ":") != 1 {
			return nil, "", invalid("redis-cluster:// URL has a bad node %q (expected host:port,host:port)", hp)
		}
		seeds = append(seeds, hp)
	}
	return seeds, "redis://" + auth, nil
}
