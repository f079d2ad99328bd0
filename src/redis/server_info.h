// server_info.h — what the store learns from the server's INFO about its own safety: the
// maxmemory-policy (a policy other than noeviction lets Redis delete limiter keys under memory
// pressure, silently resetting counts) and the growth of evicted_keys.
//
// Why INFO and not CONFIG GET: managed services and hardened servers often rename or disable
// CONFIG; INFO memory / INFO stats are always there and need only the @dangerous-free INFO.
// Invariants:
//   - the policy is checked on every connection before it is ready (policy_step()), so with
//     require_noeviction no decision ever runs on an evicting node;
//   - evicted_keys growth is counted per server (INFO's run_id): a restarted server or another
//     cluster node starts a new baseline, so growth is never negative and never double counted;
//     at most kMaxServers servers are remembered (the oldest is forgotten beyond that).
// Thread-safety: every method from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mutex.h"
#include "resp_connection.h"

namespace ratelimit::redis_detail {

// The value of `field` in INFO's text ("field:value\r\n" lines), or nullopt.
std::optional<std::string_view> info_field(std::string_view info, std::string_view field);

class ServerInfoWatch {
 public:
  static constexpr size_t kMaxServers = 64;

  explicit ServerInfoWatch(bool require_noeviction) : require_noeviction_(require_noeviction) {}

  // The handshake step that reads INFO memory: records the policy, counts an unsafe one, and
  // with require_noeviction refuses it (kInvalidArgument naming the node's policy).
  HandshakeStep policy_step();
  // Feeds one INFO reply (all default sections) from any node.
  void observe(std::string_view info);

  // See RedisStore::eviction_policy().
  std::string eviction_policy() const;
  uint64_t evicted_keys() const { return evicted_.load(std::memory_order_relaxed); }
  uint64_t unsafe_nodes() const { return unsafe_.load(std::memory_order_relaxed); }

 private:
  void record_policy(std::string_view policy);

  const bool require_noeviction_;
  mutable Mutex mu_;
  std::string policy_ RL_GUARDED_BY(mu_);
  struct Seen {
    std::string run_id;
    uint64_t evicted;
  };
  std::vector<Seen> servers_ RL_GUARDED_BY(mu_);  // oldest first
  std::atomic<uint64_t> evicted_{0}, unsafe_{0};
};

}  // namespace ratelimit::redis_detail
