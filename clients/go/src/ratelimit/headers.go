// headers.go — the one place this package turns decisions into an HTTP answer, exactly as
// ratelimitd renders them (src/http/render.cc, `headers: ietf`): 200 / 429 / 400 (cost over the
// capacity); RateLimit-Policy `"name";q=<quota>;w=<s>` and RateLimit `"name";r=<remaining>;t=<s>`
// per policy; on 429 Retry-After = max(1, ceil(retry_after s)) of the most restrictive decision
// and Cache-Control: no-store; the JSON body of the most restrictive decision (ms rounded up).
// Header sets (ratelimitd's `headers:`): HeadersIETF as above; HeadersDraft6 RateLimit-Limit,
// -Remaining, -Reset of the most restrictive decision; HeadersXRateLimit the same values as
// X-RateLimit-*; HeadersNone no rate-limit fields (Retry-After and Cache-Control stay on a 429).
// ProblemJSON (ratelimitd's `problem_json: true`): a 429's body is an RFC 9457 problem.
// Invariant: Retry-After equals the t of the denying item with the longest wait (and -Reset).
package ratelimit

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PolicyInfo is what the headers need of a policy besides its decision.
type PolicyInfo struct {
	Name   string
	Quota  int64         // q: capacity
	Window time.Duration // w: the window, or the time to drain a full bucket
}

// Answer is a rendered HTTP answer.
type Answer struct {
	Status      int
	Headers     [][2]string // in the order to send them
	Body        string
	ContentType string // application/json, or application/problem+json for a problem
}

// HeaderSet is which rate-limit fields an answer carries, as ratelimitd's `headers:` setting.
type HeaderSet string

const (
	HeadersIETF       HeaderSet = "ietf" // RateLimit-Policy and RateLimit (the default)
	HeadersDraft6     HeaderSet = "draft6"
	HeadersXRateLimit HeaderSet = "x-ratelimit"
	HeadersNone       HeaderSet = "none"
)

// RenderOptions are ratelimitd's `headers:` and `problem_json:` settings.
type RenderOptions struct {
	Headers     HeaderSet // "" is HeadersIETF
	ProblemJSON bool
}

var triples = map[HeaderSet][3]string{
	HeadersDraft6:     {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"},
	HeadersXRateLimit: {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"},
}

func (s HeaderSet) check() error {
	switch s {
	case "", HeadersIETF, HeadersDraft6, HeadersXRateLimit, HeadersNone:
		return nil
	}
	return invalid("headers must be one of ietf, draft6, x-ratelimit, none, got %q", string(s))
}

const (
	quotaExceededType    = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	reducedCapacityType  = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	quotaExceededTitle   = "Request cannot be satisfied as assigned quota has been exceeded"
	reducedCapacityTitle = "Request cannot be satisfied due to temporary server capacity constraints"
)

func ceilDiv(d time.Duration, unit time.Duration) int64 {
	us := d.Microseconds()
	u := unit.Microseconds()
	if us <= 0 {
		return 0
	}
	return (us-1)/u + 1
}

func retryAfterSeconds(d Decision) int64 {
	if s := ceilDiv(d.RetryAfter, time.Second); s > 1 {
		return s
	}
	return 1
}

func resetSeconds(d Decision) int64 {
	if d.Allowed {
		return ceilDiv(d.ResetAfter, time.Second)
	}
	return retryAfterSeconds(d)
}

// SfString quotes s as an sf-string: '"' and '\' escaped, bytes outside printable ASCII as '?'.
func SfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		default:
			b.WriteByte('?')
		}
	}
	b.WriteByte('"')
	return b.String()
}

// algo::most_restrictive: highest (denied, exceeds capacity, retry_after, -remaining), first of equals.
func mostRestrictive(ds []Decision) int {
	rank := func(d Decision) [4]int64 {
		var r [4]int64
		if !d.Allowed {
			r[0] = 1
		}
		if d.Reason == "exceeds_capacity" {
			r[1] = 1
		}
		r[2], r[3] = int64(d.RetryAfter), -d.Remaining
		return r
	}
	best := 0
	for i := 1; i < len(ds); i++ {
		a, b := rank(ds[i]), rank(ds[best])
		for j := 0; j < 4; j++ {
			if a[j] != b[j] {
				if a[j] > b[j] {
					best = i
				}
				break
			}
		}
	}
	return best
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	// encoding/json escapes <, > and & for HTML; ratelimitd's JSON does not.
	r := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&")
	return r.Replace(string(b))
}

// RenderDecisions renders one or several policies' decisions (same order in both slices) as
// ratelimitd's defaults do (headers: ietf, no problem+json).
func RenderDecisions(ds []Decision, ps []PolicyInfo) Answer {
	return RenderDecisionsWith(ds, ps, RenderOptions{})
}

// RenderDecisionsWith renders as ratelimitd does with the given `headers:` and `problem_json:`.
func RenderDecisionsWith(ds []Decision, ps []PolicyInfo, o RenderOptions) Answer {
	set := o.Headers
	if set == "" {
		set = HeadersIETF
	}
	triple, hasTriple := triples[set]
	k := mostRestrictive(ds)
	d, p := ds[k], ps[k]
	items := make([]string, len(ps))
	for i, pi := range ps {
		items[i] = fmt.Sprintf("%s;q=%d;w=%d", SfString(pi.Name), pi.Quota, ceilDiv(pi.Window, time.Second))
	}
	policyField := strings.Join(items, ", ")
	var headers [][2]string
	if d.Reason == "exceeds_capacity" {
		// The capacity is what the client must learn: the quota fields only.
		if set == HeadersIETF {
			headers = append(headers, [2]string{"RateLimit-Policy", policyField})
		}
		if hasTriple {
			headers = append(headers, [2]string{triple[0], strconv.FormatInt(d.Limit, 10)})
		}
		headers = append(headers, [2]string{"Cache-Control", "no-store"})
		msg := fmt.Sprintf("the request's cost exceeds the capacity (%d) of policy '%s': it can never be admitted", d.Limit, p.Name)
		return Answer{Status: 400, Headers: headers, ContentType: "application/json",
			Body: `{"error":"cost_exceeds_capacity","message":` + jsonString(msg) + `,"policy":` + jsonString(p.Name) + `,"limit":` + strconv.FormatInt(d.Limit, 10) + "}"}
	}
	if set == HeadersIETF {
		for i, pi := range ps {
			items[i] = fmt.Sprintf("%s;r=%d;t=%d", SfString(pi.Name), ds[i].Remaining, resetSeconds(ds[i]))
		}
		headers = append(headers, [2]string{"RateLimit-Policy", policyField}, [2]string{"RateLimit", strings.Join(items, ", ")})
	} else if hasTriple {
		headers = append(headers, [2]string{triple[0], strconv.FormatInt(d.Limit, 10)},
			[2]string{triple[1], strconv.FormatInt(d.Remaining, 10)}, [2]string{triple[2], strconv.FormatInt(resetSeconds(d), 10)})
	}
	status := 200
	retryMs := int64(0)
	if !d.Allowed {
		status = 429
		retryMs = ceilDiv(d.RetryAfter, time.Millisecond)
		headers = append(headers, [2]string{"Retry-After", strconv.FormatInt(retryAfterSeconds(d), 10)}, [2]string{"Cache-Control", "no-store"})
	}
	contentType, body := "application/json", "{"
	if !d.Allowed && o.ProblemJSON {
		store := d.Reason == "failed_closed"
		typ, title := quotaExceededType, quotaExceededTitle
		if store {
			typ, title = reducedCapacityType, reducedCapacityTitle
		}
		var violated []string
		for i, pi := range ps {
			if !ds[i].Allowed {
				violated = append(violated, jsonString(pi.Name))
			}
		}
		contentType = "application/problem+json"
		body = `{"type":` + jsonString(typ) + `,"title":` + jsonString(title) + `,"violated-policies":[` + strings.Join(violated, ",") + "],"
	}
	body += fmt.Sprintf(`"allowed":%t,"policy":%s,"limit":%d,"remaining":%d,"reset_ms":%d,"retry_after_ms":%d,"delay_ms":%d}`,
		d.Allowed, jsonString(p.Name), d.Limit, d.Remaining, ceilDiv(d.ResetAfter, time.Millisecond), retryMs, ceilDiv(d.Delay, time.Millisecond))
	return Answer{Status: status, Headers: headers, Body: body, ContentType: contentType}
}
