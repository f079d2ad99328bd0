// resp_test.go — redigo as a client of ratelimitd's Redis protocol (resp_listen, issue 32):
// ratelimitd's own acquire called with Do("RL.ACQUIRE") shares one count with HTTP callers, and
// redis-cell's CL.THROTTLE answers its five integers. No client code of this package is involved:
// any Redis client is a ratelimitd client; this pins that down for Go's.
package ratelimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// respFields reads RESP2's flat array of name, value pairs.
func respFields(t *testing.T, reply interface{}) map[string]interface{} {
	t.Helper()
	flat, err := redis.Values(reply, nil)
	if err != nil || len(flat)%2 != 0 {
		t.Fatalf("not a flat array of pairs: %v %v", reply, err)
	}
	out := map[string]interface{}{}
	for i := 0; i < len(flat); i += 2 {
		name, _ := redis.String(flat[i], nil)
		out[name] = flat[i+1]
	}
	return out
}

func TestRedigoAcquireOverRespSharesTheCountWithHTTP(t *testing.T) {
	resp := freePort(t)
	awaitWindowRoom(t, time.Hour, time.Minute)
	d := startRatelimitd(t, fmt.Sprintf("resp_listen: 127.0.0.1:%d\npolicies:\n  api: {algorithm: fixed_window, limit: 4, window: 1h}\n", resp))
	waitPort(t, resp, d.cmd, "ratelimitd resp_listen")
	c, err := redis.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", resp), redis.DialReadTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	httpAcquire := func() (int, map[string]interface{}) {
		res, err := http.Post(d.url+"/v1/acquire", "application/json", strings.NewReader(`{"key":"shared","policy":"api"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]interface{}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	var remaining []int64
	for i := 0; i < 4; i++ {
		if i%2 == 0 {
			f := respFields(t, mustDo(t, c, "RL.ACQUIRE", "shared", "api"))
			if f["allowed"] != int64(1) {
				t.Fatalf("RESP acquire %d refused: %v", i, f)
			}
			remaining = append(remaining, f["remaining"].(int64))
		} else {
			status, body := httpAcquire()
			if status != 200 {
				t.Fatalf("HTTP acquire %d: %d %v", i, status, body)
			}
			remaining = append(remaining, int64(body["remaining"].(float64)))
		}
	}
	if fmt.Sprint(remaining) != "[3 2 1 0]" {
		t.Fatalf("one count of 4 over RESP and HTTP: remaining %v", remaining)
	}
	if f := respFields(t, mustDo(t, c, "RL.ACQUIRE", "shared", "api")); f["allowed"] != int64(0) {
		t.Fatalf("a fifth over RESP admitted: %v", f)
	}
	if status, _ := httpAcquire(); status != 429 {
		t.Fatalf("a fifth over HTTP: %d", status)
	}
	cell, err := redis.Int64s(c.Do("CL.THROTTLE", "user123", 15, 30, 60, 1))
	if err != nil || fmt.Sprint(cell) != "[0 16 15 -1 2]" {
		t.Fatalf("CL.THROTTLE user123 15 30 60 1: %v %v", cell, err)
	}
}

func mustDo(t *testing.T, c redis.Conn, cmd string, args ...interface{}) interface{} {
	t.Helper()
	reply, err := c.Do(cmd, args...)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return reply
}
