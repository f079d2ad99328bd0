// caps.h — the connection caps: limits.max_connections over the API listeners,
// limits.max_connections_per_client per client address, and the admin listener's own bound
// (kAdminMaxConnections), so a flood on the API port never locks the operator out.
//
// Why a token: a connection holds a ConnectionSlot from admission to close, whichever transport
// serves it (the HTTP/1.1 connection, or an HTTP/2 one that took it over); destroying the slot
// counts it out, so no transport can forget to.
// Invariants: every admitted API connection is counted (even with the per-client cap off), so
// a reload that turns the cap on sees the connections already open.
// Thread-safety: admit() on the listeners' thread, slots destroyed on any worker; one mutex,
// taken once per open and close.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "mutex.h"
#include "transport_host.h"

namespace ratelimit::server {

// Connections the admin listener holds at most (outside limits.max_connections).
inline constexpr int64_t kAdminMaxConnections = 64;

class ConnectionCaps;

// One admitted connection's place in the caps (move-only; counted out when destroyed).
class ConnectionSlot {
 public:
  ConnectionSlot(ConnectionSlot&& other) noexcept
      : caps_(std::exchange(other.caps_, nullptr)), address_(std::move(other.address_)), admin_(other.admin_) {}
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ~ConnectionSlot();

  // The client's IP address as text ("unknown" when the socket could not tell).
  const std::string& address() const { return address_; }
  bool admin() const { return admin_; }

 private:
  friend class ConnectionCaps;
  ConnectionSlot(ConnectionCaps* caps, std::string address, bool admin)
      : caps_(caps), address_(std::move(address)), admin_(admin) {}
  ConnectionCaps* caps_;
  std::string address_;
  bool admin_;
};

class ConnectionCaps {
 public:
  // `limits` and `counters` must outlive the caps and every slot.
  ConnectionCaps(const LimitsSource& limits, TransportCounters& counters) : limits_(limits), counters_(counters) {}

  // Counts a new connection in, or refuses it (nullopt; counted in the metrics) when a cap is
  // reached: the global limits.max_connections, then the per-address cap; for `admin`, the
  // admin listener's own bound.
  [[nodiscard]] std::optional<ConnectionSlot> admit(std::string address, bool admin);

 private:
  friend class ConnectionSlot;
  void release(const std::string& address, bool admin);

  const LimitsSource& limits_;
  LimitsSource::Cache cache_;  // admit() runs on the listeners' one thread
  TransportCounters& counters_;
  std::atomic<int64_t> admin_open_{0};
  Mutex mu_;
  std::unordered_map<std::string, size_t> per_client_ RL_GUARDED_BY(mu_);
};

}  // namespace ratelimit::server
