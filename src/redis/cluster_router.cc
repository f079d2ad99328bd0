// cluster_router.cc — slot routing, redirections, retries and topology refresh for Redis
// Cluster (see cluster_router.h for the rules and invariants).
#include "cluster_router.h"

#include <hiredis/hiredis.h>

#include <boost/asio/post.hpp>
#include <algorithm>
#include <charconv>
#include <future>

#include "resp.h"

namespace ratelimit::redis_detail {
namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr int kMaxAttempts = 16;               // sends of one command (redirects + retries)
constexpr milliseconds kRetryFirst{5};         // backoff of the first resend, doubled each time
constexpr milliseconds kRetryMax{100};
constexpr milliseconds kMinRefreshGap{100};    // between two reads of the slot map
constexpr milliseconds kNoNodeRetry{20};       // no ready node to ask: try again after this

std::string encode(std::vector<std::string> argv) { return encode_command(argv); }

const std::string& asking_command() {
  static const std::string c = encode({"ASKING"});
  return c;
}

std::string_view str_of(const redisReply* r) {
  if (r == nullptr || r->str == nullptr) return {};
  return {r->str, r->len};
}

bool is_string(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

// "<slot> <host>:<port>" of a MOVED or ASK error (after the word). Host may be empty.
bool parse_redirect(std::string_view rest, int& slot, std::string& host, uint16_t& port) {
  const size_t sp = rest.find(' ');
  if (sp == std::string_view::npos) return false;
  auto [p1, e1] = std::from_chars(rest.data(), rest.data() + sp, slot);
  if (e1 != std::errc() || slot < 0 || slot >= kSlotCount) return false;
  std::string_view node = rest.substr(sp + 1);
  const size_t colon = node.rfind(':');
  if (colon == std::string_view::npos) return false;
  unsigned p = 0;
  auto [p2, e2] = std::from_chars(node.data() + colon + 1, node.data() + node.size(), p);
  if (e2 != std::errc() || p == 0 || p > 65535) return false;
  std::string_view h = node.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  host = std::string(h);
  port = static_cast<uint16_t>(p);
  return true;
}

// A RESP2 map (flat array of key, value, ...): the value of `key`, or null.
const redisReply* field(const redisReply* map, std::string_view key) {
  if (map == nullptr || map->type != REDIS_REPLY_ARRAY) return nullptr;
  for (size_t i = 0; i + 1 < map->elements; i += 2) {
    if (is_string(map->element[i]) && str_of(map->element[i]) == key) return map->element[i + 1];
  }
  return nullptr;
}

Status shape_error(const char* what) {
  return Status::internal(std::string("unexpected CLUSTER ") + what + " reply");
}

}  // namespace

Result<std::vector<SlotRange>> parse_cluster_map(const redisReply* reply, bool slots_form) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return shape_error(slots_form ? "SLOTS" : "SHARDS");
  }
  std::vector<SlotRange> out;
  if (slots_form) {
    // [[first, last, [host, port, id, ...] (the master), [replica], ...], ...]
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* e = reply->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
          e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER ||
          e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
          e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
        return shape_error("SLOTS");
      }
      SlotRange r;
      r.first = static_cast<int>(e->element[0]->integer);
      r.last = static_cast<int>(e->element[1]->integer);
      std::string_view host = str_of(e->element[2]->element[0]);
      r.host = host == "?" ? std::string() : std::string(host);
      r.port = static_cast<uint16_t>(e->element[2]->element[1]->integer);
      out.push_back(std::move(r));
    }
  } else {
    // [{slots: [first, last, ...], nodes: [{id, port, ip, endpoint, role, health, ...}]}, ...]
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* shard = reply->element[i];
      const redisReply* slots = field(shard, "slots");
      const redisReply* nodes = field(shard, "nodes");
      if (slots == nullptr || nodes == nullptr || slots->type != REDIS_REPLY_ARRAY ||
          nodes->type != REDIS_REPLY_ARRAY) {
        return shape_error("SHARDS");
      }
      if (slots->elements == 0) continue;  // a shard without slots (a new or emptied master)
      // The master of the shard; an online one when a failed old master is still listed.
      const redisReply* master = nullptr;
      for (size_t n = 0; n < nodes->elements; ++n) {
        const redisReply* node = nodes->element[n];
        if (str_of(field(node, "role")) != "master") continue;
        if (master == nullptr || str_of(field(node, "health")) == "online") master = node;
      }
      if (master == nullptr) continue;
      const redisReply* port = field(master, "port");
      if (port == nullptr || port->type != REDIS_REPLY_INTEGER) return shape_error("SHARDS");
      std::string host(str_of(field(master, "endpoint")));
      if (host.empty() || host == "?") host = std::string(str_of(field(master, "ip")));
      if (host == "?") host.clear();
      for (size_t s = 0; s + 1 < slots->elements; s += 2) {
        if (slots->element[s]->type != REDIS_REPLY_INTEGER ||
            slots->element[s + 1]->type != REDIS_REPLY_INTEGER) {
          return shape_error("SHARDS");
        }
        SlotRange r;
        r.first = static_cast<int>(slots->element[s]->integer);
        r.last = static_cast<int>(slots->element[s + 1]->integer);
        r.host = host;
        r.port = static_cast<uint16_t>(port->integer);
        out.push_back(r);
      }
    }
  }
  for (const auto& r : out) {
    if (r.first < 0 || r.last >= kSlotCount || r.first > r.last || r.port == 0) {
      return Status::internal("CLUSTER map with an invalid slot range");
    }
  }
  return out;
}

struct ClusterRouter::Routed {
  std::shared_ptr<const std::string> command;
  std::string prelude;  // the caller's (SCRIPT LOAD ...), kept for every resend
  int slot = 0;
  int attempts = 0;
  NodePool* via = nullptr;         // where the latest send went
  NodePool* ask_target = nullptr;  // set for the one send after an ASK
  steady_clock::time_point deadline;
  ReplyCallback done;
};

ClusterRouter::ClusterRouter(std::vector<Endpoint> seeds, std::string display,
                             const RouterOptions& options, RouterCounters& counters)
    : options_(options),
      counters_(counters),
      credentials_(seeds.front()),
      display_(std::move(display)),
      io_(options.io_threads),
      refresh_timer_(io_.first()),
      periodic_timer_(io_.first()) {
  RouterOptions seed_options = options_;
  seed_options.handshake.clear();  // topology queries need no script
  std::lock_guard lock(mu_);
  for (const Endpoint& e : seeds) {
    seed_pools_.push_back(std::make_unique<NodePool>(
        io_, connection_config(e, "Redis Cluster seed " + e.address(), seed_options), 1,
        counters_, [this] { notify(); }));
    seed_pools_.back()->start();
  }
  asio::post(io_.first(), [this] {
    arm_periodic();
    refresh_on_io();
  });
}

ClusterRouter::~ClusterRouter() { close(); }

void ClusterRouter::close() {
  std::call_once(closed_, [this] {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    // Deferred resends complete (kUnavailable) on their thread before it stops.
    std::promise<void> drained;
    asio::post(io_.first(), [this, &drained] {
      {
        std::lock_guard lock(mu_);
        for (const auto& t : retry_timers_) t->cancel();
      }
      refresh_timer_.cancel();
      periodic_timer_.cancel();
      asio::post(io_.first(), [&drained] { drained.set_value(); });
    });
    drained.get_future().wait();
    std::vector<NodePool*> all;
    {
      std::lock_guard lock(mu_);
      for (auto& [_, p] : pools_) all.push_back(p.get());
      for (auto& p : seed_pools_) all.push_back(p.get());
    }
    for (NodePool* p : all) p->close();  // pending calls complete (failure policy) here
    io_.stop();
  });
}

void ClusterRouter::notify() {
  std::lock_guard lock(mu_);
  changed_.notify_all();
}

NodePool* ClusterRouter::pool_locked(const std::string& host, uint16_t port) {
  Endpoint e = credentials_;
  e.host = host;
  e.port = port;
  const std::string address = e.address();
  auto it = pools_.find(address);
  if (it != pools_.end()) return it->second.get();
  auto pool = std::make_unique<NodePool>(
      io_, connection_config(e, "Redis Cluster node " + address, options_),
      options_.connections_per_node, counters_, [this] { notify(); });
  pool->start();
  NodePool* raw = pool.get();
  pools_.emplace(address, std::move(pool));
  return raw;
}

void ClusterRouter::send(int slot, std::shared_ptr<const std::string> command,
                         ReplyCallback done, std::string_view prelude) {
  auto c = std::make_shared<Routed>();
  c->command = std::move(command);
  c->prelude = std::string(prelude);
  c->slot = slot < 0 ? 0 : slot;
  c->deadline = steady_clock::now() + options_.command_timeout;
  c->done = std::move(done);
  dispatch(c);
}

void ClusterRouter::dispatch(const RoutedPtr& c) {
  ++c->attempts;
  NodePool* pool = c->ask_target != nullptr
                       ? c->ask_target
                       : slots_[static_cast<size_t>(c->slot)].load(std::memory_order_acquire);
  if (pool == nullptr) {
    request_refresh();
    return retry_later(c, Status::unavailable("Redis Cluster " + display_ +
                                              ": no master known for slot " +
                                              std::to_string(c->slot) + " yet"));
  }
  c->via = pool;
  const std::string_view prelude =
      c->ask_target != nullptr ? std::string_view(asking_command()) : std::string_view(c->prelude);
  ReplyCallback cb = [this, c](const Status& error, const redisReply* reply) {
    on_reply(c, error, reply);
  };
  if (pool->submit(*c->command, cb, prelude)) return;
  request_refresh();
  retry_later(c, pool->not_ready_error());
}

void ClusterRouter::on_reply(const RoutedPtr& c, const Status& error, const redisReply* reply) {
  c->ask_target = nullptr;
  if (!error.is_ok()) {
    // Written, then lost or late: it may have run, so it is not sent again.
    request_refresh();
    return c->done(error, reply);
  }
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    const std::string_view text = str_of(reply);
    const bool moved = text.starts_with("MOVED ");
    if (moved || text.starts_with("ASK ")) {
      int slot = 0;
      std::string host;
      uint16_t port = 0;
      if (!parse_redirect(text.substr(moved ? 6 : 4), slot, host, port) ||
          c->attempts >= kMaxAttempts) {
        return c->done(Status::unavailable("Redis Cluster redirection not followed: " +
                                           std::string(text)),
                       nullptr);
      }
      if (host.empty()) host = c->via->config().endpoint.host;  // "unknown endpoint": same host
      NodePool* target;
      {
        std::lock_guard lock(mu_);
        target = pool_locked(host, port);
      }
      if (moved) {
        counters_.moved.fetch_add(1, std::memory_order_relaxed);
        slots_[static_cast<size_t>(slot)].store(target, std::memory_order_release);
        request_refresh();
      } else {
        counters_.asked.fetch_add(1, std::memory_order_relaxed);
        c->ask_target = target;
      }
      return dispatch(c);
    }
    const bool down = text.starts_with("CLUSTERDOWN");
    if (down || text.starts_with("TRYAGAIN")) {
      if (down) {
        {
          std::lock_guard lock(mu_);
          cluster_down_ = Status::unavailable("Redis Cluster answered: " + std::string(text));
          cluster_down_at_ = steady_clock::now();
        }
        request_refresh();
      }
      return retry_later(c, Status::unavailable("Redis Cluster answered: " + std::string(text)));
    }
  }
  c->done(error, reply);
}

void ClusterRouter::retry_later(const RoutedPtr& c, Status why) {
  const int shift = std::min(c->attempts - 1, 8);
  const milliseconds delay = std::min(kRetryFirst * (1 << std::max(shift, 0)), kRetryMax);
  if (c->attempts >= kMaxAttempts || steady_clock::now() + delay > c->deadline) {
    return c->done(Status::unavailable(why.message() + " (gave up after " +
                                       std::to_string(c->attempts) + " tries in " +
                                       std::to_string(options_.command_timeout.count()) + " ms)"),
                   nullptr);
  }
  counters_.cluster_retries.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lock(mu_);
  if (closing_) {
    lock.unlock();
    return c->done(Status::unavailable("the Redis store is shutting down"), nullptr);
  }
  auto timer = std::make_shared<asio::steady_timer>(io_.first(), delay);
  retry_timers_.insert(timer);
  timer->async_wait([this, c, timer](const boost::system::error_code& ec) {
    bool closing;
    {
      std::lock_guard l(mu_);
      retry_timers_.erase(timer);
      closing = closing_;
    }
    if (ec || closing) return c->done(Status::unavailable("the Redis store is shutting down"), nullptr);
    dispatch(c);
  });
}

// --- Topology ------------------------------------------------------------------------------

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
    std::lock_guard lock(mu_);
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
      encode({"CLUSTER", slots_form ? "SLOTS" : "SHARDS"}));
  ReplyCallback cb = [this, via, slots_form](const Status& error, const redisReply* reply) {
    const std::string host = via->config().endpoint.host;
    if (!error.is_ok()) return finish_refresh(error, host);
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
      const std::string_view text = str_of(reply);
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
    std::lock_guard lock(mu_);
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
      std::lock_guard lock(mu_);
      refreshing_ = false;
      next_refresh_allowed_ = steady_clock::now() + kMinRefreshGap;
      again = refresh_again_ || !have_map_;
      refresh_again_ = false;
    }
    if (again) refresh_on_io();
  });
}

// --- Readiness -----------------------------------------------------------------------------

Status ClusterRouter::wait_ready(milliseconds timeout) {
  const auto deadline = steady_clock::now() + timeout + milliseconds(100);
  std::unique_lock lock(mu_);
  for (;;) {
    if (topology_error_.code() == StatusCode::kInvalidArgument) return topology_error_;
    bool all_seeds_failed = true;
    for (const auto& p : seed_pools_) {
      if (Status s = p->last_error(); s.code() == StatusCode::kInvalidArgument) return s;
      all_seeds_failed = all_seeds_failed && p->all_failed_once() && p->ready_connections() == 0;
    }
    if (have_map_) {
      bool all_ready = true;
      for (NodePool* p : masters_) {
        if (Status s = p->last_error(); s.code() == StatusCode::kInvalidArgument) return s;
        all_ready = all_ready && p->ready_connections() > 0;
      }
      if (all_ready) return {};
    } else if (all_seeds_failed) {
      break;
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  if (!topology_error_.is_ok()) return topology_error_;
  for (NodePool* p : masters_) {
    if (Status s = p->last_error(); !s.is_ok()) return s;
  }
  for (const auto& p : seed_pools_) {
    if (Status s = p->last_error(); !s.is_ok()) return s;
  }
  return Status::deadline_exceeded("connecting to Redis Cluster " + display_ +
                                   " took longer than " + std::to_string(timeout.count()) +
                                   " ms");
}

size_t ClusterRouter::ready_connections() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (NodePool* p : masters_) n += p->ready_connections();
  return n;
}

Status ClusterRouter::serving() const {
  std::lock_guard lock(mu_);
  if (!have_map_) {
    if (!topology_error_.is_ok()) return topology_error_;
    return Status::unavailable("the Redis Cluster's slot map has not been read yet");
  }
  if (!cluster_down_.is_ok() && steady_clock::now() - cluster_down_at_ < std::chrono::seconds(1)) {
    return cluster_down_;
  }
  // Every slot needs a master with a ready connection: report the first range that has none.
  for (int s = 0; s < kSlotCount; ++s) {
    NodePool* p = slots_[static_cast<size_t>(s)].load(std::memory_order_acquire);
    if (p != nullptr && p->ready_connections() > 0) continue;
    int last = s;
    while (last + 1 < kSlotCount &&
           slots_[static_cast<size_t>(last + 1)].load(std::memory_order_acquire) == p) {
      ++last;
    }
    const std::string range = "slots " + std::to_string(s) + "-" + std::to_string(last);
    if (p == nullptr) return Status::unavailable(range + " are served by no Redis Cluster node");
    return Status::unavailable(range + ": " + p->not_ready_error().message());
  }
  return {};
}

Status ClusterRouter::last_error() const {
  std::lock_guard lock(mu_);
  if (!topology_error_.is_ok()) return topology_error_;
  for (NodePool* p : masters_) {
    if (Status s = p->last_error(); !s.is_ok()) return s;
  }
  if (!have_map_) {
    for (const auto& p : seed_pools_) {
      if (Status s = p->last_error(); !s.is_ok()) return s;
    }
  }
  return {};
}

}  // namespace ratelimit::redis_detail
