// cluster_test.go — RedisLimiter on a real Redis Cluster (three masters, startCluster; issue 31):
// slotOf is Redis' CLUSTER KEYSLOT; 200 acquires with 50 in flight on a limit of 10 admit exactly
// 10 on each of 30 keys spread over every master at once (batches are cut per slot); a key's
// slot migrated from one master to another under load (MIGRATING/IMPORTING, the keys moved
// mid-round, then the slot handed over: ASK, then MOVED) keeps an exact count — 350 of 600 per
// policy, no decision answered by the failure policy.
package ratelimit

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

type testCluster struct {
	url   string
	ports []int
	conns []redis.Conn
}

// startCluster starts three cluster-enabled redis-servers (each with its bus port free) and
// joins them with redis-cli --cluster create (no replicas); ready when each says cluster_state:ok.
func startCluster(t *testing.T) *testCluster {
	c := &testCluster{}
	for len(c.ports) < 3 {
		port := freePort(t)
		if port > 55535 {
			continue
		}
		dir := t.TempDir()
		cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no",
			"--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		dieWithTest(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd}
		t.Cleanup(p.stop)
		waitPort(t, port, cmd, "redis-server (cluster)")
		c.ports = append(c.ports, port)
	}
	args := []string{"--cluster", "create"}
	for _, p := range c.ports {
		args = append(args, fmt.Sprintf("127.0.0.1:%d", p))
	}
	create := exec.Command("redis-cli", append(args, "--cluster-replicas", "0", "--cluster-yes")...)
	dieWithTest(create)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, p := range c.ports {
		conn, err := redis.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c.conns = append(c.conns, conn)
		end := time.Now().Add(20 * time.Second)
		for {
			info, _ := redis.String(conn.Do("CLUSTER", "INFO"))
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("node %d: no cluster_state:ok within 20 s", p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.url = fmt.Sprintf("redis-cluster://127.0.0.1:%d,127.0.0.1:%d", c.ports[0], c.ports[1])
	return c
}

// ownerOf is the index of the master that owns slot now.
func (c *testCluster) ownerOf(t *testing.T, slot int) int {
	ranges, err := redis.Values(c.conns[0].Do("CLUSTER", "SLOTS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		f := r.([]any)
		node := f[2].([]any)
		if lo, hi := int(f[0].(int64)), int(f[1].(int64)); slot >= lo && slot <= hi {
			for i, p := range c.ports {
				if int64(p) == node[1].(int64) {
					return i
				}
			}
		}
	}
	t.Fatalf("no owner for slot %d", slot)
	return -1
}

func TestCluster(t *testing.T) {
	c := startCluster(t)

	t.Run("the hash slot is the one Redis computes", func(t *testing.T) {
		keys := []string{"rl:{user-1}:api", "rl:{}:x", "no-tag", "{a}{b}", "rl:{ключ ✓}:p#log", "rl:{%7Bx%7D}:p", "x{}{y}", "x{y"}
		for i := 0; i < 50; i++ {
			keys = append(keys, fmt.Sprintf("rl:{k%d}:api", i*7919))
		}
		for _, k := range keys {
			want, err := redis.Int(c.conns[0].Do("CLUSTER", "KEYSLOT", k))
			if err != nil || slotOf(k) != want {
				t.Errorf("%q: slotOf %d, CLUSTER KEYSLOT %d (%v)", k, slotOf(k), want, err)
			}
		}
	})

	t.Run("exactly 10 of 200 on each of 30 keys over every master", func(t *testing.T) {
		prefix := "rl-race-" + runID + ":"
		l, err := NewRedisLimiter(c.url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 30 * time.Second,
			Policies: map[string]PolicySpec{"api": {Algorithm: "fixed_window", Limit: 10, Window: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var keys []string
		owners := map[int]bool{}
		for i := 0; i < 30; i++ {
			keys = append(keys, fmt.Sprintf("user-%d", i))
			owners[c.ownerOf(t, slotOf(prefix+"{"+keys[i]+"}:api"))] = true
		}
		if len(owners) != 3 {
			t.Fatalf("the keys should land on every master, got %v", owners)
		}
		awaitWindowRoom(t, time.Hour, time.Minute)
		ds := inFlight(30*200, 50*30, func(i int) Decision {
			d, _ := l.Record(context.Background(), "api", keys[i%30], 1)
			return d
		})
		for k := range keys {
			admitted := 0
			for i := k; i < len(ds); i += 30 {
				if ds[i].Allowed {
					admitted++
				}
			}
			if admitted != 10 {
				t.Errorf("%s: %d admitted, want 10", keys[k], admitted)
			}
		}
		if l.Failures() != 0 {
			t.Errorf("%d failures", l.Failures())
		}
	})

	t.Run("a slot migrated under load keeps an exact count", func(t *testing.T) {
		prefix := "rl-move-" + runID + ":"
		policies := map[string]PolicySpec{
			"fw":  {Algorithm: "fixed_window", Limit: 350, Window: time.Hour},
			"swl": {Algorithm: "sliding_window_log", Limit: 350, Window: time.Minute},
			"tb":  {Algorithm: "token_bucket", Rate: 1e-6, Burst: 350},
		}
		l, err := NewRedisLimiter(c.url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 30 * time.Second, Policies: policies})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		key := ""
		for i := 0; key == ""; i++ {
			if c.ownerOf(t, slotOf(fmt.Sprintf("%s{moving-%d}:fw", prefix, i))) == 0 {
				key = fmt.Sprintf("moving-%d", i)
			}
		}
		slot := slotOf(prefix + "{" + key + "}:fw")
		src, dst, third := c.conns[0], c.conns[1], c.conns[2]
		fromID, _ := redis.String(src.Do("CLUSTER", "MYID"))
		toID, _ := redis.String(dst.Do("CLUSTER", "MYID"))
		names := []string{"fw", "swl", "tb"}
		allowed := map[string]int{}
		var mu sync.Mutex
		round := func(during func()) {
			var side sync.WaitGroup
			if during != nil {
				side.Add(1)
				go func() { defer side.Done(); during() }()
			}
			ds := inFlight(300, 50, func(i int) Decision {
				d, _ := l.Record(context.Background(), names[i%3], key, 1)
				return d
			})
			side.Wait()
			mu.Lock()
			for i, d := range ds {
				if d.Allowed {
					allowed[names[i%3]]++
				}
			}
			mu.Unlock()
		}
		must := func(_ any, err error) {
			if err != nil {
				t.Error(err)
			}
		}
		awaitWindowRoom(t, time.Hour, time.Minute)
		round(nil) // 1: before
		must(dst.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", fromID))
		must(src.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", toID))
		round(nil)     // 2: migrating, the keys still on the source
		round(func() { // 3: the keys move mid-round
			keys, err := redis.Strings(src.Do("CLUSTER", "GETKEYSINSLOT", slot, 1000))
			if err != nil || len(keys) == 0 {
				t.Errorf("GETKEYSINSLOT: %v %v", keys, err)
				return
			}
			args := []any{"127.0.0.1", c.ports[1], "", 0, 5000, "KEYS"}
			for _, k := range keys {
				args = append(args, k)
			}
			must(src.Do("MIGRATE", args...))
		})
		round(nil)     // 4: the keys on the target, the slot not yet: ASK
		round(func() { // 5: the slot handed over mid-round
			for _, n := range []redis.Conn{dst, src, third} {
				must(n.Do("CLUSTER", "SETSLOT", slot, "NODE", toID))
			}
		})
		round(nil) // 6: after: MOVED, then the target
		if o := c.ownerOf(t, slot); o != 1 {
			t.Errorf("slot owner %d, want 1", o)
		}
		for _, n := range names {
			if allowed[n] != 350 {
				t.Errorf("%s: %d admitted of 600, want 350", n, allowed[n])
			}
		}
		if l.Failures() != 0 {
			t.Errorf("%d failures", l.Failures())
		}
	})
}
