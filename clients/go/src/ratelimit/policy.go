// policy.go — what a limit is, validated as ratelimitd validates its config (src/core/policy.cc),
// and the five policy arguments the Redis function library takes (docs/redis-functions.md).
// The arguments are the very numbers ratelimitd sends for the same policy: a bucket's window is
// time_to_drain_us of a full bucket in the same float64 arithmetic, and the rate is formatted
// so it parses back to the same double. A Policy is immutable once made.
package ratelimit

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// Algorithms, in the library's order (their index is the algorithm argument).
var Algorithms = []string{"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"}

// The bounds of include/ratelimit/policy.h, generated into this package (policy_bounds.json;
// tests/redis/policy_bounds_test.cc fails when it drifts), never copied by hand.
//
//go:embed policy_bounds.json
var policyBoundsJSON []byte

type policyBounds struct {
	MaxLimit           int64   `json:"max_limit"`
	MaxEveryHitLimit   int64   `json:"max_every_hit_limit"`
	MaxCost            int64   `json:"max_cost"`
	MaxSlidingLogLimit int64   `json:"max_sliding_log_limit"`
	MinWindowUs        int64   `json:"min_window_us"`
	MaxWindowUs        int64   `json:"max_window_us"`
	MinRate            float64 `json:"min_rate"`
	MaxRate            float64 `json:"max_rate"`
	MaxKeyBytes        int     `json:"max_key_bytes"`
	NamePattern        string  `json:"policy_name_pattern"`
	ExactIntegerLimit  float64 `json:"exact_integer_limit"`
	Unit               int64   `json:"unit"`
}

var bounds = func() (b policyBounds) {
	if err := json.Unmarshal(policyBoundsJSON, &b); err != nil {
		panic("ratelimit: policy_bounds.json: " + err.Error())
	}
	return b
}()

var (
	MaxLimit           = bounds.MaxLimit
	MaxEveryHitLimit   = bounds.MaxEveryHitLimit
	MaxCost            = bounds.MaxCost
	MaxSlidingLogLimit = bounds.MaxSlidingLogLimit
	MaxKeyBytes        = bounds.MaxKeyBytes
	minWindowUs        = bounds.MinWindowUs
	maxWindowUs        = bounds.MaxWindowUs
	minRate, maxRate   = bounds.MinRate, bounds.MaxRate
	unit               = bounds.Unit
	twoPow53           = bounds.ExactIntegerLimit
	policyName         = regexp.MustCompile(bounds.NamePattern)
)

// PolicySpec is a policy as configured: window algorithms take Limit and Window, buckets Rate
// and Burst (and Mode "police" or "shape" for the leaky bucket).
type PolicySpec struct {
	Algorithm   string
	Limit       int64
	Window      time.Duration
	Rate        float64
	Burst       int64
	Mode        string
	CountDenied bool
	EveryHit    bool // fixed_window only: envoyproxy/ratelimit's every-hit counter
}

// Policy is a validated policy.
type Policy struct {
	Name      string
	Algorithm string
	Limit     int64 // capacity: the limit, or a bucket's burst (q of RateLimit-Policy)
	WindowUs  int64 // the window, or the time to drain a full bucket (w of RateLimit-Policy)
	EveryHit  bool
	args      [6]string // algorithm index, limit, window_us, rate, shape, counting
}

func drainedU(elapsedUs int64, rate float64) int64 { return int64(float64(elapsedUs) * rate) }

// units.h time_to_drain_us.
func timeToDrainUs(needU int64, rate float64) int64 {
	if needU <= 0 {
		return 0
	}
	t := int64(math.Ceil(float64(needU) / rate))
	for t > 0 && drainedU(t-1, rate) >= needU {
		t--
	}
	for drainedU(t, rate) < needU {
		t++
	}
	return t
}

func invalid(format string, a ...any) error {
	return &Error{Code: "invalid_policy", Message: fmt.Sprintf(format, a...)}
}

// NewPolicy validates spec under name; the error is an *Error with Code "invalid_policy".
func NewPolicy(name string, s PolicySpec) (Policy, error) {
	if !policyName.MatchString(name) {
		return Policy{}, invalid("policy name must be 1-64 characters of [A-Za-z0-9_.:-], got %q", name)
	}
	index := -1
	for i, a := range Algorithms {
		if a == s.Algorithm {
			index = i
		}
	}
	if index < 0 {
		return Policy{}, invalid("policy %q: unknown algorithm %q (expected fixed_window, sliding_window_log, sliding_window_counter, token_bucket or leaky_bucket)", name, s.Algorithm)
	}
	counting := "0"
	if s.CountDenied {
		counting = "1"
	}
	if s.Algorithm == "token_bucket" || s.Algorithm == "leaky_bucket" {
		if s.Burst < 1 || s.Burst > MaxLimit {
			return Policy{}, invalid("burst must be an integer between 1 and %d, got %d", MaxLimit, s.Burst)
		}
		if math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Rate < minRate || s.Rate > maxRate {
			return Policy{}, invalid("policy %q: rate must be a finite number of units per second between 1e-06 and 1e9, got %v", name, s.Rate)
		}
		if 2*float64(s.Burst)*float64(unit)/s.Rate > twoPow53 {
			return Policy{}, invalid("policy %q: burst / rate is too long (over 140 years to refill)", name)
		}
		shape := "0"
		switch s.Mode {
		case "", "police":
		case "shape":
			if s.Algorithm == "leaky_bucket" {
				shape = "1"
			}
		default:
			return Policy{}, invalid("policy %q: mode must be police or shape, got %q", name, s.Mode)
		}
		w := timeToDrainUs(s.Burst*unit, s.Rate)
		return Policy{Name: name, Algorithm: s.Algorithm, Limit: s.Burst, WindowUs: w,
			args: [6]string{strconv.Itoa(index), strconv.FormatInt(s.Burst, 10), strconv.FormatInt(w, 10),
				strconv.FormatFloat(s.Rate, 'g', -1, 64), shape, counting}}, nil
	}
	everyHit := s.EveryHit && s.Algorithm == "fixed_window"
	lo, hi := int64(1), int64(MaxLimit)
	if everyHit {
		lo, hi, counting = 0, MaxEveryHitLimit, "2"
	}
	if s.Limit < lo || s.Limit > hi {
		return Policy{}, invalid("limit must be an integer between %d and %d, got %d", lo, hi, s.Limit)
	}
	w := s.Window.Microseconds()
	if s.Window%time.Microsecond != 0 || w < minWindowUs || w > maxWindowUs {
		return Policy{}, invalid("window must be between 1ms and 366d in whole microseconds, got %v", s.Window)
	}
	if s.Algorithm == "sliding_window_log" && s.Limit > MaxSlidingLogLimit {
		return Policy{}, invalid("policy %q: sliding_window_log keeps one entry per admitted request, so its limit is capped at %d (got %d); use sliding_window_counter for larger limits", name, MaxSlidingLogLimit, s.Limit)
	}
	if s.Algorithm == "sliding_window_counter" && float64(s.Limit+1)*float64(w) > twoPow53 {
		return Policy{}, invalid("policy %q: limit x window overflows exact arithmetic ((limit + 1) * window_us must be <= 2^53)", name)
	}
	return Policy{Name: name, Algorithm: s.Algorithm, Limit: s.Limit, WindowUs: w, EveryHit: everyHit,
		args: [6]string{strconv.Itoa(index), strconv.FormatInt(s.Limit, 10), strconv.FormatInt(w, 10), "0", "0", counting}}, nil
}

// validateRequest: a key of 1 ... 512 bytes and a cost of 1 ... 1e9 (0 too when every hit counts).
func validateRequest(p *Policy, key string, cost int64) error {
	if key == "" {
		return &Error{Code: "invalid_key", Message: "key must not be empty"}
	}
	if len(key) > MaxKeyBytes {
		return &Error{Code: "invalid_key", Message: fmt.Sprintf("key is %d bytes; the maximum is %d", len(key), MaxKeyBytes)}
	}
	lo := int64(1)
	if p.EveryHit {
		lo = 0
	}
	if cost < lo || cost > MaxCost {
		return &Error{Code: "invalid_cost", Message: fmt.Sprintf("cost must be between %d and %d, got %d", lo, MaxCost, cost)}
	}
	return nil
}

// validateReport checks a report's key and cost (usage known after the fact, docs/usage.md): a
// whole number from -MaxCost (a refund) to MaxCost, 0 included, as ratelimitd's
// validate_report_cost.
func validateReport(p *Policy, key string, cost int64) error {
	if err := validateRequest(p, key, 1); err != nil {
		return err
	}
	if cost < -MaxCost || cost > MaxCost {
		return &Error{Code: "invalid_cost", Message: fmt.Sprintf("cost of a report must be between %d and %d, got %d", -MaxCost, MaxCost, cost)}
	}
	return nil
}

var rateShorthand = regexp.MustCompile(`^([1-9][0-9]{0,15})/(?:(second|minute|hour|day)|([1-9][0-9]{0,8})(s|m|h|d))$`)

var rateUnits = map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
	"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}

// ParseRate reads the "10/minute" / "100/30s" shorthand (as the Node and Python clients, and
// slowapi / Flask-Limiter users write limits): a sliding_window_counter policy — the window
// algorithm whose memory does not grow with the limit and whose boundary burst is bounded. It is
// strict: anything else (spaces, plurals, 0, other units) is an *Error invalid_policy. The limit
// and window are checked against the bounds when the policy is made (NewPolicy).
func ParseRate(text string) (PolicySpec, error) {
	m := rateShorthand.FindStringSubmatch(text)
	if m == nil {
		return PolicySpec{}, invalid(`bad rate %q: expected "<count>/<second|minute|hour|day>" or "<count>/<n><s|m|h|d>", e.g. "10/minute" or "100/30s"`, text)
	}
	limit, _ := strconv.ParseInt(m[1], 10, 64)
	window := rateUnits[m[2]]
	if m[2] == "" {
		n, _ := strconv.ParseInt(m[3], 10, 64)
		if n > math.MaxInt64/int64(rateUnits[m[4]]) {
			return PolicySpec{}, invalid("bad rate %q: the window is longer than a time.Duration holds", text)
		}
		window = time.Duration(n) * rateUnits[m[4]]
	}
	return PolicySpec{Algorithm: "sliding_window_counter", Limit: limit, Window: window}, nil
}

// MustParseRate is ParseRate for limits written in the program: it panics on a bad one.
func MustParseRate(text string) PolicySpec {
	s, err := ParseRate(text)
	if err != nil {
		panic(err)
	}
	return s
}
