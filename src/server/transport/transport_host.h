// transport_host.h — what the transport reads and reports of the daemon around it: the connection
// limits (a part of the published configuration), the listen address, and the counters it
// bumps. The composition root implements both interfaces over the published configuration
// (config/published.h: PublishedLimits) and the metrics (metrics/metrics.h: Metrics).
//
// Why interfaces here: the transport (listener, worker, caps, the HTTP/1.1 and h2c
// connections) must not include the configuration, the metrics or anything they reach (the
// decision service, Envoy's API); it names only what it needs, and those rooms depend on it.
// `Endpoint`, the metrics label a route carries, is declared here and defined by the metrics
// (metrics.h): the transport only carries it from the route table to count_request().
// Invariants: limits are read on a worker's thread through that worker's cache, so a reload
// changes them between two requests, never within one.
// Thread-safety: LimitsSource::get and every TransportCounters method may be called from any
// thread (each thread with its own LimitsSource::Cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ratelimit/clock.h"

namespace ratelimit::server {

// A route's label in the request metrics (defined in metrics.h; the transport only carries it).
// Endpoint{} labels what no route named: the transport's own refusals (400, 413, 431) and a
// fallback given no label.
enum class Endpoint : uint8_t;

// The limits the transport enforces (limits.* in the configuration; config.h's LimitsConfig
// adds the API's own).
struct ConnectionLimits {
  size_t max_body_bytes = 8 * 1024;
  size_t max_header_bytes = 8 * 1024;
  Micros request_timeout{10'000'000};  // first byte to last byte of one request
  Micros idle_timeout{60'000'000};     // a kept-alive connection waiting for its next request
  size_t max_connections = 10'000;
  // Connections one client address may hold open on the API listener; 0 = no per-address cap.
  // Behind a reverse proxy every connection comes from the proxy, hence off by default.
  size_t max_connections_per_client = 0;
  // A new connection that has sent no byte yet is closed after this (idle_timeout applies only
  // once a request has been seen; the shorter of the two applies before), so idle sockets cannot
  // hold the global cap for long.
  Micros first_byte_timeout{5'000'000};
};

struct ListenAddress {
  std::string host = "127.0.0.1";  // a literal IPv4/IPv6 address
  uint16_t port = 8080;
  friend bool operator==(const ListenAddress&, const ListenAddress&) = default;
};

// The connection limits as now published.
class LimitsSource {
 public:
  // One reader's cache (one per thread): re-read only when a newer configuration was published.
  struct Cache {
    std::shared_ptr<const void> hold;  // keeps `limits` alive
    const ConnectionLimits* limits = nullptr;
    uint64_t generation = 0;
  };
  // The limits as of this call; the reference stays valid until the next get() with `cache`.
  virtual const ConnectionLimits& get(Cache& cache) const = 0;

 protected:
  ~LimitsSource() = default;
};

// What the transport counts (the request and connection metrics).
class TransportCounters {
 public:
  // One answer sent: the route's label (`Endpoint`, Endpoint{} for the transport's own) and
  // its status.
  virtual void count_request(Endpoint endpoint, unsigned status) = 0;
  virtual void connection_opened() = 0;
  virtual void connection_closed() = 0;
  virtual void connection_rejected() = 0;
  virtual void connection_rejected_per_client() = 0;
  virtual void connection_first_byte_timeout() = 0;
  virtual int64_t open_connections() const = 0;

 protected:
  ~TransportCounters() = default;
};

}  // namespace ratelimit::server
