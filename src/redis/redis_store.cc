// redis_store.cc — RedisStore: the Store interface on Redis/Valkey (see
// include/ratelimit/redis_store.h for the contract).
//
// Layers: script_codec (pure: key names, EVALSHA encoding, reply decoding, failure decisions),
// connection (transport: one pipelined Asio connection), and this file, which owns the pool
// and the I/O threads, validates input, spreads requests over ready connections round robin,
// and turns every transport or Redis failure into the configured failure-policy decision,
// counted. No exception leaves this file: the completion is always called, exactly once.
#include "ratelimit/redis_store.h"

#include <hiredis/hiredis.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <thread>

#include "connection.h"
#include "script_codec.h"

namespace ratelimit {
namespace asio = boost::asio;
using namespace redis_detail;

namespace {

constexpr size_t kMaxConnections = 256;
constexpr size_t kMaxIoThreads = 64;
constexpr size_t kMaxKeyPrefixLength = 128;

std::string display_url(const RedisUrl& u) {
  if (u.is_unix) return "unix://" + u.path + (u.db != 0 ? "?db=" + std::to_string(u.db) : "");
  const bool v6 = u.host.find(':') != std::string::npos;
  return "redis://" + (v6 ? "[" + u.host + "]" : u.host) + ":" + std::to_string(u.port) + "/" +
         std::to_string(u.db);
}

Status validate_options(const RedisStoreOptions& o) {
  if (o.connections > kMaxConnections) {
    return Status::invalid_argument("connections must be 0 (automatic) ... " +
                                    std::to_string(kMaxConnections));
  }
  if (o.io_threads < 1 || o.io_threads > kMaxIoThreads) {
    return Status::invalid_argument("io_threads must be 1 ... " + std::to_string(kMaxIoThreads));
  }
  if (o.connect_timeout.count() <= 0) return Status::invalid_argument("connect_timeout must be > 0");
  if (o.command_timeout.count() <= 0) return Status::invalid_argument("command_timeout must be > 0");
  if (o.reconnect_backoff_min.count() <= 0 ||
      o.reconnect_backoff_max < o.reconnect_backoff_min) {
    return Status::invalid_argument(
        "reconnect backoff must satisfy 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (o.key_prefix.size() > kMaxKeyPrefixLength) {
    return Status::invalid_argument("key_prefix is longer than " +
                                    std::to_string(kMaxKeyPrefixLength) + " bytes");
  }
  if (o.key_prefix.find_first_of("{}") != std::string::npos) {
    return Status::invalid_argument(
        "key_prefix must not contain '{' or '}' (they would change the keys' hash tag)");
  }
  return {};
}

}  // namespace

struct RedisStore::Impl {
  RedisStoreOptions options;
  ConnectionConfig config;
  AtomicCounters counters;
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<Connection>> connections;
  std::atomic<size_t> next{0};

  std::mutex change_mu;
  std::condition_variable changed;

  ~Impl() { stop(); }

  void start() {
    for (size_t i = 0; i < options.io_threads; ++i) {
      ios.push_back(std::make_unique<asio::io_context>(1));
      guards.push_back(asio::make_work_guard(*ios.back()));
    }
    for (size_t i = 0; i < options.connections; ++i) {
      connections.push_back(std::make_shared<Connection>(
          *ios[i % ios.size()], config, counters, [this] {
            std::lock_guard lock(change_mu);
            changed.notify_all();
          }));
    }
    for (auto& io : ios) threads.emplace_back([io = io.get()] { io->run(); });
    for (auto& c : connections) c->start();
  }

  void stop() {
    for (auto& c : connections) c->close();  // pending calls complete (failure policy) here
    guards.clear();
    for (auto& io : ios) io->stop();
    for (auto& t : threads) t.join();
    threads.clear();
    connections.clear();
  }

  // Waits until a connection is ready, or every connection failed its first attempt, or the
  // connect timeout (plus a margin for the timer's resolution) passed.
  Status wait_first_connection() {
    const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout +
                          std::chrono::milliseconds(100);
    std::unique_lock lock(change_mu);
    for (;;) {
      size_t failed = 0;
      for (auto& c : connections) {
        if (c->ready()) return {};
        if (c->failed_attempts() > 0) ++failed;
      }
      if (failed == connections.size()) break;
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout) break;
    }
    for (auto& c : connections) {
      if (Status s = c->last_error(); !s.is_ok()) return s;
    }
    return Status::deadline_exceeded("connecting to " + config.display_url +
                                     " took longer than " +
                                     std::to_string(options.connect_timeout.count()) + " ms");
  }

  std::optional<int64_t> now_arg() const {
    if (options.test_clock == nullptr) return std::nullopt;
    return options.test_clock->now().count();
  }

  // Sends `r` on the next ready connection; with none ready, fails it at once (inline).
  void submit(RequestPtr r) {
    const size_t n = connections.size();
    const size_t first = next.fetch_add(1, std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      if (connections[(first + i) % n]->submit(r)) return;
    }
    Status why = Status::unavailable("no connection to " + config.display_url + " is ready");
    for (auto& c : connections) {
      if (Status s = c->last_error(); !s.is_ok()) {
        why = Status::unavailable("no connection to Redis is ready; last error: " + s.message());
        break;
      }
    }
    r->on_reply(why, nullptr);
  }

  // Counts a failed call; returns the failure-policy decisions for `limits`.
  std::vector<Decision> fail_decisions(const Status& why, std::span<const int64_t> limits) {
    counters.errors.fetch_add(1, std::memory_order_relaxed);
    if (why.code() == StatusCode::kDeadlineExceeded) {
      counters.timeouts.fetch_add(1, std::memory_order_relaxed);
    }
    auto& c = options.on_failure == FailurePolicy::kOpen ? counters.failed_open
                                                         : counters.failed_closed;
    c.fetch_add(limits.size(), std::memory_order_relaxed);
    std::vector<Decision> out;
    out.reserve(limits.size());
    for (int64_t limit : limits) out.push_back(failure_decision(options.on_failure, limit));
    return out;
  }

  // One script call; `finish` receives the decisions (real or failure policy).
  template <typename Finish>
  void run_script(const ScriptCall& call, std::vector<int64_t> limits, Finish finish) {
    auto r = std::make_unique<Request>();
    r->command = encode_evalsha(call);
    r->script = static_cast<int>(call.script);
    r->on_reply = [this, limits = std::move(limits), finish = std::move(finish)](
                      const Status& error, const redisReply* reply) mutable {
      if (error.is_ok()) {
        auto decoded = decode_decisions(reply, limits);
        if (decoded.ok()) {
          counters.commands.fetch_add(1, std::memory_order_relaxed);
          finish(std::move(decoded).value());
          return;
        }
        finish(fail_decisions(decoded.status(), limits));
        return;
      }
      finish(fail_decisions(error, limits));
    };
    submit(std::move(r));
  }

  void decide(const Policy& policy, std::string_view key, int64_t cost, algo::Op op,
              DecisionCallback done) {
    if (Status s = validate_key(key); !s.is_ok()) return done(s);
    if (Status s = validate_cost(cost); !s.is_ok()) return done(s);
    run_script(decide_call(options.key_prefix, policy, key, cost, op, now_arg()),
               {policy.limit()}, [done = std::move(done)](std::vector<Decision> d) {
                 done(d.front());
               });
  }
};


Result<std::shared_ptr<RedisStore>> RedisStore::connect(RedisStoreOptions options) {
  if (Status s = validate_options(options); !s.is_ok()) return s;
  auto url = parse_redis_url(options.url);
  if (!url.ok()) return url.status();
  if (options.connections == 0) {
    const size_t hw = std::max<unsigned>(1, std::thread::hardware_concurrency());
    options.connections = std::min<size_t>(16, 2 * hw);
  }
  options.io_threads = std::min(options.io_threads, options.connections);

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->config.url = *url;
  impl->config.display_url = display_url(*url);
  impl->config.connect_timeout = options.connect_timeout;
  impl->config.command_timeout = options.command_timeout;
  impl->config.backoff_min = options.reconnect_backoff_min;
  impl->config.backoff_max = options.reconnect_backoff_max;
  for (const auto& script : kLuaScripts) {
    std::string argv[] = {"SCRIPT", "LOAD", std::string(script.text)};
    impl->config.script_loads.push_back(encode_command(argv));
  }
  impl->start();
  if (!options.lazy_connect) {
    if (Status s = impl->wait_first_connection(); !s.is_ok()) return s;  // ~Impl stops all
  }
  return std::shared_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisStore::~RedisStore() = default;

void RedisStore::acquire_async(const Policy& policy, std::string_view key, int64_t cost,
                               DecisionCallback done) {
  impl_->decide(policy, key, cost, algo::Op::kAcquire, std::move(done));
}

void RedisStore::peek_async(const Policy& policy, std::string_view key, int64_t cost,
                            DecisionCallback done) {
  impl_->decide(policy, key, cost, algo::Op::kPeek, std::move(done));
}

void RedisStore::acquire_all_async(std::span<const Policy> policies, std::string_view key,
                                   int64_t cost, DecisionsCallback done) {
  if (Status s = validate_acquire_all(policies, key, cost); !s.is_ok()) return done(s);
  std::vector<int64_t> limits;
  for (const Policy& p : policies) limits.push_back(p.limit());
  impl_->run_script(
      acquire_all_call(impl_->options.key_prefix, policies, key, cost, algo::Op::kAcquire,
                       impl_->now_arg()),
      std::move(limits), [done = std::move(done)](std::vector<Decision> d) { done(std::move(d)); });
}

void RedisStore::reset_async(const Policy& policy, std::string_view key, StatusCallback done) {
  if (Status s = validate_key(key); !s.is_ok()) return done(s);
  std::vector<std::string> argv = {"DEL"};
  for (auto& k : reset_keys(impl_->options.key_prefix, policy, key)) argv.push_back(std::move(k));
  auto r = std::make_unique<Request>();
  r->command = encode_command(argv);
  r->on_reply = [impl = impl_.get(), done = std::move(done)](const Status& error,
                                                             const redisReply* reply) {
    auto& c = impl->counters;
    if (!error.is_ok()) {
      c.errors.fetch_add(1, std::memory_order_relaxed);
      if (error.code() == StatusCode::kDeadlineExceeded) {
        c.timeouts.fetch_add(1, std::memory_order_relaxed);
      }
      return done(error);
    }
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
      c.errors.fetch_add(1, std::memory_order_relaxed);
      return done(Status::unavailable("Redis refused DEL: " +
                                      (reply != nullptr && reply->str != nullptr
                                           ? std::string(reply->str, reply->len)
                                           : std::string("unexpected reply"))));
    }
    c.commands.fetch_add(1, std::memory_order_relaxed);
    done(Status());
  };
  impl_->submit(std::move(r));
}

RedisStoreCounters RedisStore::counters() const {
  const auto& c = impl_->counters;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {get(c.commands), get(c.errors),      get(c.timeouts),   get(c.failed_open),
          get(c.failed_closed), get(c.connects), get(c.disconnects), get(c.script_reloads)};
}

size_t RedisStore::ready_connections() const {
  size_t n = 0;
  for (const auto& c : impl_->connections) n += c->ready() ? 1 : 0;
  return n;
}

const RedisStoreOptions& RedisStore::options() const { return impl_->options; }

Status RedisStore::last_error() const {
  for (const auto& c : impl_->connections) {
    if (Status s = c->last_error(); !s.is_ok()) return s;
  }
  return {};
}

}  // namespace ratelimit
