// conformance_test.go — clients/conformance/README.md's runner contract for the Go client: every
// case of the five tests/vectors/<algorithm>.json against real Redis (test time, every field of
// every decision equal), step by step and with all cases at once (batched calls), and
// race.json (the server's clock, 50 goroutines in flight).
package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

type vecExpect struct {
	Allowed      bool   `json:"allowed"`
	Reason       string `json:"reason"`
	Remaining    int64  `json:"remaining"`
	ResetAfterUs int64  `json:"reset_after_us"`
	RetryAfterUs int64  `json:"retry_after_us"`
	DelayUs      int64  `json:"delay_us"`
}
type vecStep struct {
	TUs    int64      `json:"t_us"`
	Cost   *int64     `json:"cost"`
	Op     string     `json:"op"`
	Key    string     `json:"key"`
	Expect *vecExpect `json:"expect"`
	Policy *vecPolicy `json:"policy"` // the case's policy redefined for this step (a reload)
}
type vecPolicy struct {
	Limit    int64   `json:"limit"`
	WindowUs int64   `json:"window_us"`
	Rate     float64 `json:"rate"`
	Burst    int64   `json:"burst"`
	Mode     string  `json:"mode"`
}
type vecCase struct {
	Name        string    `json:"name"`
	Policy      vecPolicy `json:"policy"`
	CountDenied bool      `json:"count_denied"`
	EveryHit    bool      `json:"every_hit"`
	Steps       []vecStep `json:"steps"`
}
type vecFile struct {
	Algorithm string    `json:"algorithm"`
	Cases     []vecCase `json:"cases"`
}

func specOf(algorithm string, p vecPolicy, countDenied, everyHit bool) PolicySpec {
	return PolicySpec{Algorithm: algorithm, Limit: p.Limit, Window: time.Duration(p.WindowUs) * time.Microsecond,
		Rate: p.Rate, Burst: p.Burst, Mode: p.Mode, CountDenied: countDenied, EveryHit: everyHit}
}

func conformanceDir() string {
	return envOr("RATELIMIT_CONFORMANCE_DIR", filepath.Join(sourceDir(), "clients", "conformance"))
}

// The library's algorithms (clients/conformance/algorithms.json, held to kAlgorithmTable by
// tests/redis/algorithm_table_test.cc), in table order.
type tableRow struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Kind  string `json:"kind"`
}

func loadTable(t *testing.T) []tableRow {
	b, err := os.ReadFile(filepath.Join(conformanceDir(), "algorithms.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Algorithms []tableRow `json:"algorithms"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Algorithms
}

// This client ports the rate algorithms; concurrency limits (leases) are ratelimitd's API, not
// this client's.
var notPorted = []string{"concurrency"}

func TestAlgorithmListIsTheLibrarys(t *testing.T) {
	var rate, missing []string
	for i, a := range loadTable(t) {
		if a.Index != i {
			t.Errorf("row %d (%s) has index %d", i, a.Name, a.Index)
		}
		if a.Kind == "rate" {
			rate = append(rate, a.Name)
		}
		found := false
		for _, c := range Algorithms {
			found = found || c == a.Name
		}
		if !found {
			missing = append(missing, a.Name)
		}
	}
	// Same order: an algorithm's index is its argument to the Redis functions.
	if fmt.Sprint(Algorithms) != fmt.Sprint(rate) {
		t.Errorf("Algorithms = %v, the library's rate algorithms are %v", Algorithms, rate)
	}
	if fmt.Sprint(missing) != fmt.Sprint(notPorted) {
		t.Errorf("algorithms of the library this client neither ports nor says it does not: %v (declared: %v)", missing, notPorted)
	}
}

func loadVectors(t *testing.T) []vecFile {
	dir := envOr("RATELIMIT_VECTORS_DIR", filepath.Join(sourceDir(), "tests", "vectors"))
	var files []vecFile
	for _, row := range loadTable(t) { // the rate algorithms' files, the library's list (not the client's)
		if row.Kind != "rate" {
			continue
		}
		a := row.Name
		b, err := os.ReadFile(filepath.Join(dir, a+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var f vecFile
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func runCase(t *testing.T, url, prefix, algorithm string, c vecCase) []string {
	l, err := NewRedisLimiter(url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 5 * time.Second,
		Policies: map[string]PolicySpec{"p": specOf(algorithm, c.Policy, c.CountDenied, c.EveryHit)}})
	if err != nil {
		return []string{fmt.Sprintf("%s/%s: %v", algorithm, c.Name, err)}
	}
	defer l.Close()
	ctx := context.Background()
	capacity := c.Policy.Limit
	if c.Policy.Burst != 0 {
		capacity = c.Policy.Burst
	}
	var failures []string
	for i, s := range c.Steps {
		key := s.Key
		if key == "" {
			key = "k"
		}
		cost := int64(1)
		if s.Cost != nil {
			cost = *s.Cost
		}
		if s.Op == "reset" {
			if err := l.Clear(ctx, "p", key); err != nil {
				failures = append(failures, err.Error())
			}
			continue
		}
		on, want := l, capacity
		if s.Policy != nil {
			// A redefined policy: a limiter of it on the same keys, as after a reload.
			on, err = NewRedisLimiter(url, Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 5 * time.Second,
				Policies: map[string]PolicySpec{"p": specOf(algorithm, *s.Policy, c.CountDenied, c.EveryHit)}})
			if err != nil {
				return append(failures, fmt.Sprintf("%s/%s step %d: %v", algorithm, c.Name, i, err))
			}
			want = s.Policy.Limit
			if s.Policy.Burst != 0 {
				want = s.Policy.Burst
			}
		}
		var d Decision
		switch s.Op {
		case "peek":
			d, err = on.CheckAt(ctx, "p", key, cost, s.TUs)
		case "report":
			d, err = on.ReportAt(ctx, "p", key, cost, s.TUs)
		default:
			d, err = on.RecordAt(ctx, "p", key, cost, s.TUs)
		}
		if on != l {
			on.Close()
		}
		got := vecExpect{d.Allowed, d.Reason, d.Remaining, d.ResetAfter.Microseconds(), d.RetryAfter.Microseconds(), d.Delay.Microseconds()}
		if err != nil || s.Expect == nil || got != *s.Expect || d.Limit != want {
			failures = append(failures, fmt.Sprintf("%s/%s step %d: expected %+v limit %d, got %+v limit %d (err %v)", algorithm, c.Name, i, s.Expect, want, got, d.Limit, err))
		}
	}
	if l.Failures() != 0 {
		failures = append(failures, fmt.Sprintf("%s/%s: the store failed", algorithm, c.Name))
	}
	return failures
}

func TestConformanceVectors(t *testing.T) {
	url := testRedis(t)
	files := loadVectors(t)
	cases := 0
	for _, f := range files {
		for _, c := range f.Cases {
			cases++
			for _, msg := range runCase(t, url, fmt.Sprintf("conf:%s:go-seq:%s:%s:", runID, f.Algorithm, c.Name), f.Algorithm, c) {
				t.Error(msg)
			}
		}
	}
	if cases < 40 {
		t.Fatalf("only %d cases", cases)
	}
}

func TestConformanceVectorsAllAtOnce(t *testing.T) {
	url := testRedis(t)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for _, f := range loadVectors(t) {
		for _, c := range f.Cases {
			wg.Add(1)
			go func(algorithm string, c vecCase) {
				defer wg.Done()
				got := runCase(t, url, fmt.Sprintf("conf:%s:go-par:%s:%s:", runID, algorithm, c.Name), algorithm, c)
				mu.Lock()
				failures = append(failures, got...)
				mu.Unlock()
			}(f.Algorithm, c)
		}
	}
	wg.Wait()
	for _, msg := range failures {
		t.Error(msg)
	}
}

func TestConformanceRace(t *testing.T) {
	url := testRedis(t)
	b, err := os.ReadFile(filepath.Join(conformanceDir(), "race.json"))
	if err != nil {
		t.Fatal(err)
	}
	var race struct {
		Requests    int `json:"requests"`
		Concurrency int `json:"concurrency"`
		Cases       []struct {
			Algorithm      string    `json:"algorithm"`
			Policy         vecPolicy `json:"policy"`
			ExpectAdmitted int       `json:"expect_admitted"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &race); err != nil {
		t.Fatal(err)
	}
	for _, rc := range race.Cases {
		l, err := NewRedisLimiter(url, Options{KeyPrefix: "conf:" + runID + ":go-race:", Timeout: 5 * time.Second,
			Policies: map[string]PolicySpec{"p": specOf(rc.Algorithm, rc.Policy, false, false)}})
		if err != nil {
			t.Fatal(err)
		}
		// The windows are a year long, so a boundary mid-race is rare, not impossible (the next
		// is 2026-12-18 00:00 UTC); 60 s of room: a race takes well under a second, and a stalled
		// call fails it by its 5 s timeout long before.
		if rc.Policy.WindowUs > 0 {
			awaitWindowRoom(t, time.Duration(rc.Policy.WindowUs)*time.Microsecond, time.Minute)
		}
		ds := inFlight(race.Requests, race.Concurrency, func(int) Decision {
			d, _ := l.Record(context.Background(), "p", rc.Algorithm, 1)
			return d
		})
		admitted := 0
		for _, d := range ds {
			if d.Allowed {
				admitted++
			} else if d.Reason != "over_limit" {
				t.Errorf("%s: a denial with reason %s", rc.Algorithm, d.Reason)
			}
		}
		if admitted != rc.ExpectAdmitted || l.Failures() != 0 {
			t.Errorf("%s: %d admitted (want %d), %d failures", rc.Algorithm, admitted, rc.ExpectAdmitted, l.Failures())
		}
		l.Close()
	}
}
