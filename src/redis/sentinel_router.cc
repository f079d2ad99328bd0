// sentinel_router.cc — the master named by the sentinels, followed across failovers (see
// sentinel_router.h). The control thread speaks to sentinels with hiredis' blocking API and
// poll(2), every wait bounded; commands to the master go through a NodePool as usual.
#include "sentinel_router.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <cerrno>
#include <charconv>
#include <optional>

#include "resp.h"

namespace ratelimit::redis_detail {
namespace {

using Clock = std::chrono::steady_clock;

struct ContextCloser {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextCloser>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

Result<ReplyPtr> command(redisContext* c, const std::vector<std::string>& args,
                         const std::string& display) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) {
    return Status::unavailable("sentinel " + display + ": " + c->errstr);
  }
  ReplyPtr reply(r);
  if (reply->type == REDIS_REPLY_ERROR) {
    return Status::unavailable("sentinel " + display + " refused " + args[0] + " " +
                               (args.size() > 1 ? args[1] : "") + ": " + reply_text(r));
  }
  return reply;
}

bool is_string(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

std::optional<uint16_t> parse_port(std::string_view s) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// ROLE must say master: a demoted node (the sentinels' view not yet updated, or a stale
// answer) never takes a decision.
HandshakeStep role_step(std::string display) {
  HandshakeStep step;
  step.command = encode_command(std::vector<std::string>{"ROLE"});
  step.check = [display = std::move(display)](const redisReply* r) -> Status {
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        is_string(r->element[0])) {
      std::string_view role(r->element[0]->str, r->element[0]->len);
      if (role == "master") return {};
      return Status::unavailable(display + " is not the master (ROLE: " + std::string(role) +
                                 "); asking the sentinels again");
    }
    return Status::unavailable(display + " answered ROLE with " + reply_text(r));
  };
  return step;
}

}  // namespace

SentinelRouter::SentinelRouter(SentinelConfig config, const RouterOptions& options,
                               RouterCounters& counters)
    : config_(std::move(config)),
      options_(options),
      counters_(counters),
      io_(std::min(options.io_threads, options.connections_per_node)) {
  control_ = std::thread([this] { run(); });
}

SentinelRouter::~SentinelRouter() { close(); }

void SentinelRouter::close() {
  std::call_once(closed_, [this] {
    stop_ = true;
    notify();
    if (control_.joinable()) control_.join();
    std::shared_ptr<NodePool> pool;
    {
      MutexLock lock(mu_);
      pool.swap(pool_);
    }
    if (pool != nullptr) pool->close();  // pending calls complete (failure policy) here
    io_.stop();
  });
}

void SentinelRouter::notify() {
  MutexLock lock(mu_);
  changed_.notify_all();
}

void SentinelRouter::request_resolve() {
  resolve_requested_.store(true, std::memory_order_relaxed);
}

std::shared_ptr<NodePool> SentinelRouter::current_pool() const {
  MutexLock lock(mu_);
  return pool_;
}

Endpoint SentinelRouter::pubsub_endpoint(uint64_t) const {
  auto pool = current_pool();
  return pool != nullptr ? pool->config().endpoint : config_.master;  // none yet: fails, retried
}

std::string SentinelRouter::master_address() const {
  MutexLock lock(mu_);
  return master_address_;
}

void SentinelRouter::send(int, std::shared_ptr<const std::string> command, ReplyCallback done,
                          std::string_view prelude) {
  auto pool = current_pool();
  if (pool == nullptr) {
    MutexLock lock(mu_);
    Status why = sentinel_error_.is_ok()
                     ? Status::unavailable("no master for '" + config_.master_name +
                                           "' yet: the sentinels have not answered")
                     : sentinel_error_;
    lock.unlock();
    return done(why, nullptr);
  }
  // READONLY: the node was demoted under us (a failover the sentinels are announcing).
  ReplyCallback watched = [this, done = std::move(done)](const Status& e, const redisReply* r) {
    if (e.is_ok() && r != nullptr && r->type == REDIS_REPLY_ERROR &&
        std::string_view(r->str, r->len).starts_with("READONLY")) {
      request_resolve();
    }
    done(e, r);
  };
  if (pool->submit(*command, watched, prelude)) return;
  request_resolve();
  watched(pool->not_ready_error(), nullptr);
}

size_t SentinelRouter::ready_connections() const {
  auto pool = current_pool();
  return pool == nullptr ? 0 : pool->ready_connections();
}

Status SentinelRouter::last_error() const {
  auto pool = current_pool();
  if (pool != nullptr) {
    if (Status s = pool->last_error(); !s.is_ok()) return s;
  }
  MutexLock lock(mu_);
  return sentinel_error_;
}

Status SentinelRouter::wait_ready(std::chrono::milliseconds timeout) {
  // Sentinels first, then the master: allow both their connect timeouts.
  const auto deadline = Clock::now() + timeout * static_cast<long>(config_.sentinels.size() + 1) +
                        std::chrono::milliseconds(100);
  MutexLock lock(mu_);
  for (;;) {
    if (pool_ != nullptr && pool_->ready_connections() > 0) return {};
    if (pool_ != nullptr && pool_->all_failed_once() && !pool_->last_error().is_ok()) {
      return pool_->last_error();
    }
    if (pool_ == nullptr && sentinels_failed_once_) return sentinel_error_;
    if (lock.wait_until(changed_, std::min(deadline, Clock::now() + kMinResolveInterval)) ==
            std::cv_status::timeout &&
        Clock::now() >= deadline) {
      break;
    }
  }
  if (pool_ != nullptr && !pool_->last_error().is_ok()) return pool_->last_error();
  return Status::deadline_exceeded("no ready master for '" + config_.master_name + "' within " +
                                   std::to_string(timeout.count()) + " ms");
}

void SentinelRouter::install(const std::string& host, uint16_t port) {
  Endpoint e = config_.master;
  e.host = host;
  e.port = port;
  const std::string address = e.address();
  std::shared_ptr<NodePool> old;
  {
    MutexLock lock(mu_);
    if (address == master_address_ && pool_ != nullptr) return;
  }
  RouterOptions o = options_;
  const std::string display = "master '" + config_.master_name + "' at " + address;
  o.handshake.insert(o.handshake.begin(), role_step(display));
  auto pool = std::make_shared<NodePool>(io_, connection_config(e, display, o),
                                         options_.connections_per_node, counters_, [this] {
                                           auto p = current_pool();
                                           if (p != nullptr && p->ready_connections() == 0) {
                                             request_resolve();
                                           }
                                           notify();
                                         });
  pool->start();
  {
    MutexLock lock(mu_);
    old = std::exchange(pool_, pool);
    master_address_ = address;
    sentinel_error_ = Status();
  }
  counters_.topology_refreshes.fetch_add(1, std::memory_order_relaxed);
  notify();
  if (old != nullptr) old->close();  // from this thread, never an I/O thread
}

Status SentinelRouter::follow(const Endpoint& s) {
  const std::string display = s.address();
  Context c(redisConnectWithTimeout(s.host.c_str(), s.port, to_timeval(options_.connect_timeout)));
  if (c == nullptr) return Status::unavailable("sentinel " + display + ": out of memory");
  if (c->err != 0) return Status::unavailable("cannot connect to sentinel " + display + ": " +
                                              c->errstr);
  redisSetTimeout(c.get(), to_timeval(options_.connect_timeout));
  if (s.has_password) {
    std::vector<std::string> auth = {"AUTH"};
    if (!s.user.empty()) auth.push_back(s.user);
    auth.push_back(s.password);
    auto r = command(c.get(), auth, display);
    if (!r.ok()) {
      return Status::invalid_argument("sentinel " + display +
                                      " refused AUTH (check sentinel_password)");
    }
  }
  resolve_requested_ = false;
  auto r = command(c.get(), {"SENTINEL", "get-master-addr-by-name", config_.master_name}, display);
  if (!r.ok()) return r.status();
  const redisReply* a = r->get();
  if (a->type != REDIS_REPLY_ARRAY || a->elements != 2 || !is_string(a->element[0]) ||
      !is_string(a->element[1])) {
    return Status::invalid_argument("sentinel " + display + " does not know a master named '" +
                                    config_.master_name + "'");
  }
  auto port = parse_port(std::string_view(a->element[1]->str, a->element[1]->len));
  if (!port) return Status::unavailable("sentinel " + display + " gave an invalid port");
  install(std::string(a->element[0]->str, a->element[0]->len), *port);

  auto sub = command(c.get(), {"SUBSCRIBE", "+switch-master"}, display);
  if (!sub.ok()) return sub.status();
  const auto asked = Clock::now();
  for (;;) {
    if (stop_) return {};
    const auto since = Clock::now() - asked;
    if ((resolve_requested_ && since >= kMinResolveInterval) || since >= kRecheckInterval) {
      return {};  // ask again, on a fresh connection (a subscribed one cannot)
    }
    pollfd p{c->fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) return Status::unavailable("poll: " + std::to_string(errno));
    if (ready <= 0) continue;
    if (redisBufferRead(c.get()) != REDIS_OK) {
      return Status::unavailable("lost sentinel " + display + ": " + c->errstr);
    }
    for (;;) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(c.get(), &raw) != REDIS_OK) {
        return Status::unavailable("sentinel " + display + ": " + c->errstr);
      }
      if (raw == nullptr) break;
      ReplyPtr m(static_cast<redisReply*>(raw));
      // ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]
      if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 || !is_string(m->element[2])) continue;
      std::string_view text(m->element[2]->str, m->element[2]->len);
      std::vector<std::string_view> words;
      for (size_t pos = 0; pos <= text.size();) {
        size_t sp = text.find(' ', pos);
        if (sp == std::string_view::npos) sp = text.size();
        words.push_back(text.substr(pos, sp - pos));
        pos = sp + 1;
      }
      if (words.size() != 5 || words[0] != config_.master_name) continue;
      if (auto np = parse_port(words[4])) install(std::string(words[3]), *np);
    }
  }
}

void SentinelRouter::run() {
  size_t next = 0;
  auto backoff = options_.backoff_min;
  while (!stop_) {
    Status last;
    bool followed = false;
    for (size_t i = 0; i < config_.sentinels.size() && !stop_; ++i) {
      const size_t at = (next + i) % config_.sentinels.size();
      Status s = follow(config_.sentinels[at]);
      if (s.is_ok()) {
        next = at;  // a good sentinel stays the first one asked
        followed = true;
        break;
      }
      last = std::move(s);
    }
    if (followed) {
      backoff = options_.backoff_min;
      continue;
    }
    {
      MutexLock lock(mu_);
      if (pool_ == nullptr) sentinel_error_ = last;
      sentinels_failed_once_ = true;
      changed_.notify_all();
      const auto until = Clock::now() + backoff;  // or until close() (spurious wake-ups wait on)
      while (!stop_.load() && lock.wait_until(changed_, until) != std::cv_status::timeout) {
      }
    }
    next = (next + 1) % config_.sentinels.size();
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

}  // namespace ratelimit::redis_detail
