// grpcgo — the grpc-go floor of envoyproxy/ratelimit: a minimal ShouldRateLimit server on
// Debian's grpc-go (golang-google-grpc-dev 1.33, GOPATH mode, nothing downloaded) for
// tools/bench/rls_vs_http.sh. Per call it does what envoyproxy/ratelimit's memory-free core
// does at the least: builds its cache key (domain_key_value_..._<window start>, as
// src/limiter/cache_key.go) and increments a fixed window in a map, then answers OK with
// current_limit, limit_remaining and duration_until_reset like ratelimitd does.
// A floor, not the real thing: no configuration matching, no Redis, no stats, and the
// messages are decoded and encoded by hand (a pass-through codec registered as "proto")
// rather than by generated code — cheaper than envoyproxy/ratelimit's protobuf-go, so the
// peer this beats is faster than the one users run.
// usage: grpcgo -listen 127.0.0.1:PORT -limit N   (one window of one second)
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// rawCodec hands the message bytes through; the handler parses them.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

type server struct {
	mu     sync.Mutex
	counts map[string]uint64
	limit  uint64
}

var errBad = errors.New("malformed RateLimitRequest")

func varint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * uint(i))
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// fields calls f for each field of a message; length-delimited ones get their bytes.
func fields(b []byte, f func(num int, wt int, v uint64, data []byte) error) error {
	for len(b) > 0 {
		tag, n := varint(b)
		if n == 0 {
			return errBad
		}
		b = b[n:]
		num, wt := int(tag>>3), int(tag&7)
		switch wt {
		case 0:
			v, n := varint(b)
			if n == 0 {
				return errBad
			}
			b = b[n:]
			if err := f(num, wt, v, nil); err != nil {
				return err
			}
		case 2:
			l, n := varint(b)
			if n == 0 || uint64(len(b)-n) < l {
				return errBad
			}
			if err := f(num, wt, 0, b[n:n+int(l)]); err != nil {
				return err
			}
			b = b[n+int(l):]
		default:
			return errBad
		}
	}
	return nil
}

func appendVarint(out []byte, v uint64) []byte {
	for v >= 0x80 {
		out = append(out, byte(v)|0x80)
		v >>= 7
	}
	return append(out, byte(v))
}

func appendField(out []byte, num int, payload []byte) []byte {
	out = appendVarint(out, uint64(num<<3|2))
	out = appendVarint(out, uint64(len(payload)))
	return append(out, payload...)
}

func (s *server) should(in []byte) ([]byte, error) {
	var domain []byte
	var descs [][]byte
	if err := fields(in, func(num, wt int, v uint64, data []byte) error {
		if num == 1 && wt == 2 {
			domain = data
		} else if num == 2 && wt == 2 {
			descs = append(descs, data)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	now := time.Now().Unix()
	window := strconv.FormatInt(now, 10) // unit SECOND: the window starts at now
	out := appendVarint(nil, 1<<3|0)
	out = appendVarint(out, 1) // overall_code OK
	for _, d := range descs {
		// envoyproxy/ratelimit's cache key: domain_key_value_..._<window start>.
		key := make([]byte, 0, 64)
		key = append(key, domain...)
		key = append(key, '_')
		if err := fields(d, func(num, wt int, v uint64, entry []byte) error {
			if num != 1 || wt != 2 {
				return nil
			}
			return fields(entry, func(n2, w2 int, v2 uint64, kv []byte) error {
				if w2 == 2 && (n2 == 1 || n2 == 2) {
					key = append(key, kv...)
					key = append(key, '_')
				}
				return nil
			})
		}); err != nil {
			return nil, err
		}
		key = append(key, window...)
		s.mu.Lock()
		n := s.counts[string(key)] + 1
		s.counts[string(key)] = n
		s.mu.Unlock()
		code, remaining := uint64(1), uint64(0)
		if n > s.limit {
			code = 2
		} else {
			remaining = s.limit - n
		}
		limit := appendVarint(nil, 1<<3|0)
		limit = appendVarint(limit, s.limit)
		limit = appendVarint(limit, 2<<3|0)
		limit = appendVarint(limit, 1) // SECOND
		status := appendVarint(nil, 1<<3|0)
		status = appendVarint(status, code)
		status = appendField(status, 2, limit)
		status = appendVarint(status, 3<<3|0)
		status = appendVarint(status, remaining)
		reset := appendVarint(nil, 1<<3|0)
		reset = appendVarint(reset, 1)
		status = appendField(status, 4, reset)
		out = appendField(out, 2, status)
	}
	return out, nil
}

func handler(srv interface{}, ctx context.Context, dec func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error) {
	var in []byte
	if err := dec(&in); err != nil {
		return nil, err
	}
	out, err := srv.(*server).should(in)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

var desc = grpc.ServiceDesc{
	ServiceName: "envoy.service.ratelimit.v3.RateLimitService",
	HandlerType: (*interface{})(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: handler}},
	Metadata:    "envoy/service/ratelimit/v3/rls.proto",
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "host:port")
	limit := flag.Uint64("limit", 1000000000, "requests per second per key")
	flag.Parse()
	encoding.RegisterCodec(rawCodec{})
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	s := &server{counts: make(map[string]uint64), limit: *limit}
	// Old windows are dropped once a second (the map would grow by one key per second).
	go func() {
		for range time.Tick(time.Second) {
			cut := strconv.FormatInt(time.Now().Unix()-1, 10)
			s.mu.Lock()
			for k := range s.counts {
				if len(k) >= len(cut) && k[len(k)-len(cut):] < cut {
					delete(s.counts, k)
				}
			}
			s.mu.Unlock()
		}
	}()
	g := grpc.NewServer()
	g.RegisterService(&desc, s)
	log.Printf("grpcgo listening on %s", lis.Addr())
	log.Fatal(g.Serve(lis))
}
