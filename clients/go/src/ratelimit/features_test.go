// features_test.go — what users of redis_rate, express-rate-limit and slowapi expect of the
// net/http middleware (issue 31), on a real Redis and a real ratelimitd: the header sets and
// problem+json as ratelimitd sends them, a custom refusal, the decision in the request's context,
// per-route limits and the "10/minute" shorthand, the default key through trusted proxies only,
// and SkipSuccessfulRequests / SkipFailedRequests refunding after the response.
package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for text, want := range map[string]PolicySpec{
		"10/minute": {Algorithm: "sliding_window_counter", Limit: 10, Window: time.Minute},
		"100/30s":   {Algorithm: "sliding_window_counter", Limit: 100, Window: 30 * time.Second},
		"5/day":     {Algorithm: "sliding_window_counter", Limit: 5, Window: 24 * time.Hour},
		"1/second":  {Algorithm: "sliding_window_counter", Limit: 1, Window: time.Second},
	} {
		if got, err := ParseRate(text); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", text, got, err, want)
		}
	}
	for _, bad := range []string{"10 per minute", "10/minutes", "10/ minute", "0/minute", "10/0s", "ten/minute",
		"10/minute ", "10/1w", "/minute", "", "999999999/999999999d"} {
		if _, err := ParseRate(bad); err == nil || !strings.Contains(err.Error(), "bad rate") {
			t.Errorf("ParseRate(%q): want a bad rate error, got %v", bad, err)
		}
	}
	if _, err := NewPolicy("x", MustParseRate("1/1000d")); err == nil {
		t.Error("a window over the bounds must be refused when the policy is made")
	}
}

func TestClientAddress(t *testing.T) {
	trusted, err := NewTrustedProxies([]string{"10.0.0.0/8", "192.0.2.7", "::1", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	none, _ := NewTrustedProxies(nil)
	for _, c := range []struct {
		peer, xff string
		has       bool
		tp        TrustedProxies
		want      string
	}{
		{"203.0.113.9:5000", "1.2.3.4", true, trusted, "203.0.113.9"}, // untrusted peer: the header is ignored
		{"10.1.1.1:5000", "1.2.3.4", true, none, "10.1.1.1"},          // nobody trusted by default
		{"10.1.1.1:5000", "1.2.3.4, 198.51.100.2, 10.0.0.3", true, trusted, "198.51.100.2"},
		{"10.1.1.1:5000", "1.2.3.4, 10.0.0.3", true, trusted, "1.2.3.4"},
		{"10.1.1.1:5000", "1.2.3.4, garbage, 10.0.0.3", true, trusted, "10.0.0.3"}, // bad input: coarser, never chosen
		{"10.1.1.1:5000", "1.2.3.4, , 10.0.0.3", true, trusted, "10.0.0.3"},
		{"10.1.1.1:5000", "", false, trusted, "10.1.1.1"},
		{"[::1]:5000", "[2001:DB8:0::1]:80", true, trusted, "2001:db8::1"},
		{"[::ffff:10.0.0.1]:5000", "::ffff:198.51.100.4", true, trusted, "198.51.100.4"},
		{"not-an-address", "1.2.3.4", true, trusted, "not-an-address"},
	} {
		if got := ClientAddress(c.peer, c.xff, c.has, c.tp); got != c.want {
			t.Errorf("ClientAddress(%q, %q) = %q; want %q", c.peer, c.xff, got, c.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "fe80::1%eth0", "1.2.3", ""} {
		if _, err := NewTrustedProxies([]string{bad}); err == nil {
			t.Errorf("NewTrustedProxies(%q) must be refused", bad)
		}
	}
}

type featureFixture struct {
	l      *RedisLimiter
	prefix string
}

func featureLimiter(t *testing.T) featureFixture {
	prefix := "rl:go-feat-" + runID + ":"
	l, err := NewRedisLimiter(testRedis(t), Options{KeyPrefix: prefix, OnFailure: FailClosed, Timeout: 30 * time.Second,
		Policies: map[string]PolicySpec{
			"api":    {Algorithm: "sliding_window_log", Limit: 3, Window: 1000 * time.Second},
			"search": MustParseRate("2/hour"),
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return featureFixture{l, prefix}
}

func serveOn(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func fetch(t *testing.T, url string, header map[string]string) answer {
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, string(b)}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

func TestHeaderSetsAndProblemJSON(t *testing.T) {
	f := featureLimiter(t)
	// ratelimitd with draft6 and problem+json: its answers, read by the back-end and rendered by
	// headers.go with the same settings, are the same bytes.
	d := startRatelimitd(t, "store: { type: memory }\nheaders: draft6\nproblem_json: true\npolicies:\n  api: { algorithm: sliding_window_log, limit: 3, window: 1000s }\n")
	viaD, _ := NewRatelimitdLimiter(d.url, RatelimitdOptions{Timeout: 30 * time.Second, Windows: map[string]time.Duration{"api": 1000 * time.Second}})
	render := RenderOptions{Headers: HeadersDraft6, ProblemJSON: true}
	for i := 0; i < 5; i++ {
		body, _ := json.Marshal(map[string]any{"key": "hs-" + runID, "policy": "api"})
		res, err := http.Post(d.url+"/v1/acquire", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		theirs, _ := io.ReadAll(res.Body)
		res.Body.Close()
		dec, err := viaD.read(res.StatusCode, res.Header, theirs)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := viaD.Describe("api")
		mine := RenderDecisionsWith([]Decision{dec}, []PolicyInfo{info}, render)
		if mine.Status != res.StatusCode || mine.Body != string(theirs) || !strings.HasPrefix(res.Header.Get("Content-Type"), mine.ContentType) {
			t.Errorf("request %d: %d %s %q vs ratelimitd's %d %s %q", i, mine.Status, mine.ContentType, mine.Body, res.StatusCode, res.Header.Get("Content-Type"), theirs)
		}
		names := map[string]bool{}
		for _, h := range mine.Headers {
			names[h[0]] = true
			if res.Header.Get(h[0]) != h[1] {
				t.Errorf("request %d: %s %q vs ratelimitd's %q", i, h[0], h[1], res.Header.Get(h[0]))
			}
		}
		for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "RateLimit-Policy", "RateLimit"} {
			if res.Header.Get(h) != "" && !names[h] {
				t.Errorf("request %d: ratelimitd sent %s, the render did not", i, h)
			}
		}
	}
	// Through the middleware on Redis: each set's fields, problem+json on the 429.
	for _, c := range []struct {
		set             HeaderSet
		present, absent string
	}{{HeadersDraft6, "RateLimit-Remaining", "RateLimit"}, {HeadersXRateLimit, "X-RateLimit-Remaining", "RateLimit-Policy"},
		{HeadersNone, "", "RateLimit-Policy"}, {"", "RateLimit", "RateLimit-Remaining"}} {
		url := serveOn(t, Middleware(f.l, MiddlewareOptions{Policy: "api", Key: func(*http.Request) string { return fmt.Sprintf("set-%s-%s", c.set, runID) },
			Headers: c.set, ProblemJSON: true})(okHandler))
		a := fetch(t, url, nil)
		if a.status != 200 || (c.present != "" && a.header.Get(c.present) == "") || a.header.Get(c.absent) != "" {
			t.Errorf("set %q: %d %v", c.set, a.status, a.header)
		}
		for i := 0; i < 2; i++ {
			fetch(t, url, nil)
		}
		a = fetch(t, url, nil)
		var problem map[string]any
		_ = json.Unmarshal([]byte(a.body), &problem)
		if a.status != 429 || a.header.Get("Retry-After") == "" || a.header.Get("Content-Type") != "application/problem+json" ||
			problem["type"] != quotaExceededType || fmt.Sprint(problem["violated-policies"]) != "[api]" {
			t.Errorf("set %q refused: %d %v %s", c.set, a.status, a.header, a.body)
		}
	}
}

func TestCustomRefusalAndDecisionInContext(t *testing.T) {
	f := featureLimiter(t)
	keyed := func(name string) func(*http.Request) string {
		return func(*http.Request) string { return name + "-" + runID }
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, found := DecisionFrom(r.Context())
		_ = json.NewEncoder(w).Encode(map[string]any{"found": found, "policy": info.Policy, "key": info.Key, "allowed": info.Allowed, "remaining": info.Remaining})
	})
	mux := http.NewServeMux()
	mux.Handle("/msg", LimitFunc(f.l, MiddlewareOptions{Policy: "api", Key: keyed("msg"), StatusCode: 503, Message: map[string]string{"error": "slow down"}}, echo))
	mux.Handle("/text", LimitFunc(f.l, MiddlewareOptions{Policy: "api", Key: keyed("text"),
		Message: func(_ *http.Request, i RateLimitInfo) any {
			return fmt.Sprintf("wait %d ms", i.RetryAfter.Milliseconds())
		}}, echo))
	mux.Handle("/h", LimitFunc(f.l, MiddlewareOptions{Policy: "api", Key: keyed("h"), Handler: func(w http.ResponseWriter, r *http.Request, i RateLimitInfo) {
		seen, _ := DecisionFrom(r.Context())
		w.WriteHeader(418)
		fmt.Fprintf(w, "%s %d %t", i.Policy, i.Remaining, seen.Allowed)
	}}, echo))
	mux.Handle("/search", LimitFunc(f.l, MiddlewareOptions{Policy: "search", Key: keyed("search")}, echo)) // "2/hour"
	mux.Handle("/free", echo)
	url := serveOn(t, mux)

	var first map[string]any
	if err := json.Unmarshal([]byte(fetch(t, url+"/msg", nil).body), &first); err != nil || first["found"] != true ||
		first["policy"] != "api" || first["key"] != "msg-"+runID || first["allowed"] != true || first["remaining"] != 2.0 {
		t.Errorf("the decision in the handler: %v %v", first, err)
	}
	for _, path := range []string{"/msg", "/text", "/h"} {
		for i := 0; i < 3; i++ {
			if path != "/msg" || i < 2 {
				fetch(t, url+path, nil)
			}
		}
	}
	if a := fetch(t, url+"/msg", nil); a.status != 503 || a.body != `{"error":"slow down"}` || a.header.Get("Retry-After") == "" || a.header.Get("RateLimit") == "" {
		t.Errorf("StatusCode + Message: %d %v %q", a.status, a.header, a.body)
	}
	if a := fetch(t, url+"/text", nil); a.status != 429 || !strings.HasPrefix(a.body, "wait ") || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("Message func: %d %v %q", a.status, a.header, a.body)
	}
	if a := fetch(t, url+"/h", nil); a.status != 418 || a.body != "api 0 false" || a.header.Get("RateLimit-Policy") != `"api";q=3;w=1000` {
		t.Errorf("Handler: %d %v %q", a.status, a.header, a.body)
	}
	statuses := []int{}
	for i := 0; i < 3; i++ {
		statuses = append(statuses, fetch(t, url+"/search", nil).status)
	}
	if fmt.Sprint(statuses) != "[200 200 429]" || fetch(t, url+"/free", nil).body != `{"allowed":false,"found":false,"key":"","policy":"","remaining":0}`+"\n" {
		t.Errorf("per-route limits: /search %v", statuses)
	}
	for _, o := range []MiddlewareOptions{
		{Policy: "api", Headers: "draft7"}, {Policy: "api", StatusCode: 200}, {Policy: "api", TrustedProxies: []string{"10.0.0.0/33"}},
		{Policy: "api", Message: func() {}}, {Policy: "api", Message: "x", Handler: func(http.ResponseWriter, *http.Request, RateLimitInfo) {}},
	} {
		if _, err := NewMiddleware(f.l, o); err == nil {
			t.Errorf("%+v must be refused at construction", o)
		}
	}
}

func TestDefaultKeyThroughTrustedProxies(t *testing.T) {
	f := featureLimiter(t)
	keyOf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := DecisionFrom(r.Context())
		_, _ = w.Write([]byte(info.Key))
	})
	untrusted := serveOn(t, Middleware(f.l, MiddlewareOptions{Policy: "api"})(keyOf))
	trusted := serveOn(t, Middleware(f.l, MiddlewareOptions{Policy: "api", TrustedProxies: []string{"127.0.0.1"}})(keyOf))
	// Untrusted: a client choosing a new X-Forwarded-For each time is still one key, the peer.
	for i := 0; i < 4; i++ {
		a := fetch(t, untrusted, map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)})
		if want := map[bool]int{true: 200, false: 429}[i < 3]; a.status != want || (i < 3 && a.body != "127.0.0.1") {
			t.Errorf("untrusted request %d: %d %q", i, a.status, a.body)
		}
	}
	// Trusted: the proxy's X-Forwarded-For names the client, each its own key.
	for i := 0; i < 4; i++ {
		client := fmt.Sprintf("203.0.113.%d", 10+i)
		if a := fetch(t, trusted, map[string]string{"X-Forwarded-For": "garbage, " + client}); a.status != 200 || a.body != client {
			t.Errorf("trusted request %d: %d %q", i, a.status, a.body)
		}
	}
}

func TestSkipSuccessfulAndFailedRequests(t *testing.T) {
	f := featureLimiter(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) })
	for _, c := range []struct {
		name    string
		o       MiddlewareOptions
		refund  string // the path whose unit comes back
		counted string
	}{{"skip-failed", MiddlewareOptions{SkipFailedRequests: true}, "/fail", "/ok"},
		{"skip-successful", MiddlewareOptions{SkipSuccessfulRequests: true}, "/ok", "/fail"}} {
		key := c.name + "-" + runID
		c.o.Policy, c.o.Key = "api", func(*http.Request) string { return key }
		c.o.OnReportError = func(_ *http.Request, err error) { t.Errorf("%s: %v", c.name, err) }
		url := serveOn(t, Middleware(f.l, c.o)(mux))
		for i := 0; i < 5; i++ {
			if a := fetch(t, url+c.refund, nil); a.status == 429 {
				t.Errorf("%s: request %d to %s refused: its units must have come back", c.name, i, c.refund)
			}
			// The refund is sent after the response: wait until the store has it.
			waitUsed(t, f.l, key, 0)
		}
		fetch(t, url+c.counted, nil)
		waitUsed(t, f.l, key, 1)
	}
}

// waitUsed waits until key holds want units of "api" (a peek's remaining, against a fresh key's).
func waitUsed(t *testing.T, l *RedisLimiter, key string, want int64) {
	fresh, err := l.Check(context.Background(), "api", "never-used-"+runID, 1)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := l.Check(context.Background(), "api", key, 1)
		if err == nil && fresh.Remaining-d.Remaining == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d units used (%v), want %d", key, fresh.Remaining-d.Remaining, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
