// cluster_router.cc — slot routing, redirections, retries and readiness for Redis Cluster (see
// cluster_router.h for the rules and invariants). The slot map's refresh is
// cluster_topology.cc, the parsing of CLUSTER SHARDS / SLOTS cluster_map.cc.
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

const std::string& asking_command() {
  static const std::string c = encode_command(std::vector<std::string>{"ASKING"});
  return c;
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

}  // namespace

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
  MutexLock lock(mu_);
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
      MutexLock lock(mu_);
      closing_ = true;
    }
    // Deferred resends complete (kUnavailable) on their thread before it stops.
    std::promise<void> drained;
    asio::post(io_.first(), [this, &drained] {
      {
        MutexLock lock(mu_);
        for (const auto& t : retry_timers_) t->cancel();
      }
      refresh_timer_.cancel();
      periodic_timer_.cancel();
      asio::post(io_.first(), [&drained] { drained.set_value(); });
    });
    drained.get_future().wait();
    std::vector<NodePool*> all;
    {
      MutexLock lock(mu_);
      for (auto& [_, p] : pools_) all.push_back(p.get());
      for (auto& p : seed_pools_) all.push_back(p.get());
    }
    for (NodePool* p : all) p->close();  // pending calls complete (failure policy) here
    io_.stop();
  });
}

void ClusterRouter::notify() {
  MutexLock lock(mu_);
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
    const std::string_view text = reply_str(reply);
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
        MutexLock lock(mu_);
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
          MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  if (closing_) {
    lock.unlock();
    return c->done(Status::unavailable("the Redis store is shutting down"), nullptr);
  }
  auto timer = std::make_shared<asio::steady_timer>(io_.first(), delay);
  retry_timers_.insert(timer);
  timer->async_wait([this, c, timer](const boost::system::error_code& ec) {
    bool closing;
    {
      MutexLock l(mu_);
      retry_timers_.erase(timer);
      closing = closing_;
    }
    if (ec || closing) return c->done(Status::unavailable("the Redis store is shutting down"), nullptr);
    dispatch(c);
  });
}

// --- Readiness -----------------------------------------------------------------------------

Status ClusterRouter::wait_ready(milliseconds timeout) {
  const auto deadline = steady_clock::now() + timeout + milliseconds(100);
  MutexLock lock(mu_);
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
    if (lock.wait_until(changed_, deadline) == std::cv_status::timeout) break;
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
  MutexLock lock(mu_);
  size_t n = 0;
  for (NodePool* p : masters_) n += p->ready_connections();
  return n;
}

Endpoint ClusterRouter::pubsub_endpoint(uint64_t attempt) const {
  MutexLock lock(mu_);
  if (!masters_.empty()) return masters_[attempt % masters_.size()]->config().endpoint;
  if (!seed_pools_.empty()) return seed_pools_[attempt % seed_pools_.size()]->config().endpoint;
  return credentials_;  // no node known: this attempt fails, the next asks again
}

Status ClusterRouter::serving() const {
  MutexLock lock(mu_);
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
  MutexLock lock(mu_);
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
