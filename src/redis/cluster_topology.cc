// cluster_topology.cc — ClusterRouter's slot map refresh: when to read the map again (on a
// MOVED, on an error, periodically, at most once per kMinRefreshGap), which node to ask, and
// applying the answer (see cluster_router.h for the rules).
//
// Why its own file: the refresh is a state machine of its own (refreshing_, refresh_again_,
// two timers) that runs beside routing; routing only asks for it (request_refresh).
// Invariants: at most one refresh is in flight; a request during one runs once after it; the
// map is applied under mu_ and the refresh state is only changed on io_.first(); nothing waits
// unboundedly (no ready node: retried after kNoNodeRetry).
#include <hiredis/hiredis.h>

#include <boost/asio/post.hpp>
#include <algorithm>

#include "mutex.h"
#include "cluster_router.h"
#include "resp.h"

namespace ratelimit::redis_detail {
namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr milliseconds kMinRefreshGap{100};    // between two reads of the slot map
constexpr milliseconds kNoNodeRetry{20};       // no ready node to ask: try again after this

}  // namespace

void ClusterRouter::request_refresh() {
  asio::post(io_.first(), [this] { refresh_on_io(); });
}

void ClusterRouter::arm_periodic() {
  periodic_timer_.expires_after(options_.topology_refresh_interval);
  periodic_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    refresh_on_io();
    arm_periodic();
  });
}

void ClusterRouter::arm_refresh_timer(steady_clock::time_point at) {
  if (refresh_timer_armed_) return;
  refresh_timer_armed_ = true;
  refresh_timer_.expires_at(at);
  refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
    refresh_timer_armed_ = false;
    if (!ec) refresh_on_io();
  });
}

void ClusterRouter::refresh_on_io() {
  NodePool* via = nullptr;
  {
    MutexLock lock(mu_);
    if (closing_) return;
    if (refreshing_) {
      refresh_again_ = true;
      return;
    }
    const auto now = steady_clock::now();
    if (now < next_refresh_allowed_) {
      arm_refresh_timer(next_refresh_allowed_);
      return;
    }
    // Ask a master of the current map, else any node seen, else a seed.
    for (NodePool* p : masters_) {
      if (p->ready_connections() > 0) { via = p; break; }
    }
    for (auto it = pools_.begin(); via == nullptr && it != pools_.end(); ++it) {
      if (it->second->ready_connections() > 0) via = it->second.get();
    }
    for (auto it = seed_pools_.begin(); via == nullptr && it != seed_pools_.end(); ++it) {
      if ((*it)->ready_connections() > 0) via = it->get();
    }
    if (via == nullptr) {
      arm_refresh_timer(now + kNoNodeRetry);
      return;
    }
    refreshing_ = true;
  }
  query(via, false);
}

void ClusterRouter::query(NodePool* via, bool slots_form) {
  auto command = std::make_shared<const std::string>(
      encode_command(std::vector<std::string>{"CLUSTER", slots_form ? "SLOTS" : "SHARDS"}));
  ReplyCallback cb = [this, via, slots_form](const Status& error, const redisReply* reply) {
    const std::string host = via->config().endpoint.host;
    if (!error.is_ok()) return finish_refresh(error, host);
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
      const std::string_view text = reply_str(reply);
      if (!slots_form && (text.find("nknown subcommand") != std::string_view::npos ||
                          text.find("nknown command") != std::string_view::npos)) {
        return query(via, true);  // before Redis 7: CLUSTER SLOTS
      }
      if (text.find("cluster support disabled") != std::string_view::npos) {
        return finish_refresh(
            Status::invalid_argument("redis-cluster:// names " + via->config().endpoint.address() +
                                     ", which is not in cluster mode (" + std::string(text) +
                                     "): use redis:// for a single server"),
            host);
      }
      return finish_refresh(Status::unavailable("CLUSTER " +
                                                std::string(slots_form ? "SLOTS" : "SHARDS") +
                                                " refused: " + std::string(text)),
                            host);
    }
    finish_refresh(parse_cluster_map(reply, slots_form), host);
  };
  if (!via->submit(*command, cb)) {
    finish_refresh(via->not_ready_error(), via->config().endpoint.host);
  }
}

void ClusterRouter::finish_refresh(Result<std::vector<SlotRange>> map,
                                   const std::string& via_host) {
  // Runs on the thread of the node that answered; the map is applied under the lock, and the
  // refresh state is handed back to io_.first().
  {
    MutexLock lock(mu_);
    if (map.ok() && !closing_) {
      std::vector<NodePool*> masters;
      for (const SlotRange& r : *map) {
        NodePool* p = pool_locked(r.host.empty() ? via_host : r.host, r.port);
        for (int s = r.first; s <= r.last; ++s) {
          slots_[static_cast<size_t>(s)].store(p, std::memory_order_release);
        }
        if (std::find(masters.begin(), masters.end(), p) == masters.end()) masters.push_back(p);
      }
      masters_ = std::move(masters);
      have_map_ = !masters_.empty();
      topology_error_ = have_map_ ? Status()
                                  : Status::unavailable("Redis Cluster " + display_ +
                                                        " has no slots assigned yet");
      counters_.topology_refreshes.fetch_add(1, std::memory_order_relaxed);
    } else if (!map.ok()) {
      topology_error_ = map.status();
    }
    changed_.notify_all();
  }
  asio::post(io_.first(), [this] {
    bool again;
    {
      MutexLock lock(mu_);
      refreshing_ = false;
      next_refresh_allowed_ = steady_clock::now() + kMinRefreshGap;
      again = refresh_again_ || !have_map_;
      refresh_again_ = false;
    }
    if (again) refresh_on_io();
  });
}

}  // namespace ratelimit::redis_detail
