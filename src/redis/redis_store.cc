// redis_store.cc — RedisStore: the Store interface on Redis/Valkey (see
// include/ratelimit/redis_store.h for the contract): connecting, the Store entry points and the
// counters.
//
// Layers, bottom up: resp_connection (transport: pipelined RESP over a ByteStream), router
// (which node: standalone or cluster; one NodePool of connections per node), script_invoker
// (FCALL or EVALSHA, batching, the reloads), script_codec (pure: key names, encoding, decoding,
// failure decisions), and RedisStore::Impl (redis_store_impl.h), which validates input, builds
// the calls, and turns every transport or Redis failure into the configured failure-policy
// decision, counted. Its paths live beside this file by concern: redis_store_decide.cc (one
// batched decision; the lease ops), redis_store_envoy.cc (envoyproxy/ratelimit's key layout),
// redis_store_shared.cc (reserve / add_hits). No exception leaves these files: the completion
// is always called, exactly once.
#include "ratelimit/redis_store.h"

#include <hiredis/hiredis.h>

#include "hash_slot.h"
#include "redis_store_impl.h"
#include "tls_stream.h"

namespace ratelimit {
namespace asio = boost::asio;
using namespace redis_detail;

namespace {

constexpr size_t kMaxConnections = 256;
constexpr size_t kMaxIoThreads = 64;
constexpr size_t kMaxKeyPrefixLength = 128;

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
  if (o.topology_refresh_interval.count() <= 0) {
    return Status::invalid_argument("topology_refresh_interval must be > 0");
  }
  if (o.max_batch < 1 || o.max_batch > kMaxBatch) {
    return Status::invalid_argument("max_batch must be 1 ... " + std::to_string(kMaxBatch));
  }
  if (o.server_info_interval.count() < 0) {
    return Status::invalid_argument("server_info_interval must be >= 0 (0: no polling)");
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

RedisStore::Impl::~Impl() {
  poller.stop();
  if (router != nullptr) router->close();  // pending calls complete (failure policy) here
}

void RedisStore::Impl::start_poller() {
  if (options.server_info_interval.count() == 0) return;
  poller.start([this] {
    const auto command =
        std::make_shared<const std::string>(encode_command(std::vector<std::string>{"INFO"}));
    MutexLock lock(poller.mu);
    for (;;) {
      lock.unlock();
      router->send(kAnySlot, command, [w = info.get()](const Status& e, const redisReply* r) {
        if (e.is_ok() && r != nullptr && r->type == REDIS_REPLY_STRING) {
          w->observe(std::string_view(r->str, r->len));
        }
      });
      lock.lock();
      const auto next = std::chrono::steady_clock::now() + options.server_info_interval;
      while (!poller.stopping && lock.wait_until(poller.wake, next) != std::cv_status::timeout) {
      }
      if (poller.stopping) return;
    }
  });
}

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
  RouterOptions ro;
  ro.connections_per_node = options.connections;
  ro.io_threads = options.io_threads;
  ro.connect_timeout = options.connect_timeout;
  ro.command_timeout = options.command_timeout;
  ro.backoff_min = options.reconnect_backoff_min;
  ro.backoff_max = options.reconnect_backoff_max;
  ro.topology_refresh_interval = options.topology_refresh_interval;
  ro.sentinel_user = options.sentinel_user;
  ro.sentinel_password = options.sentinel_password;
  impl->info = std::make_unique<ServerInfoWatch>(options.require_noeviction);
  ro.handshake = {impl->info->policy_step()};  // before the scripts: refuse an unsafe node first
  auto support = std::make_shared<FunctionSupport>();
  for (auto& step : ScriptInvoker::load_steps(support, options.use_functions)) {
    ro.handshake.push_back(std::move(step));
  }
  if (url->tls) {
    auto factory = make_tls_stream_factory(options.tls);
    if (!factory.ok()) return factory.status();
    ro.make_stream = std::move(factory).value();
  }
  {
    RouterOptions plain = ro;  // a subscriber's: no scripts to load (subscriber.h)
    plain.handshake.clear();
    impl->pubsub_config = connection_config(Endpoint{}, display_url(*url) + " (release subscriber)", plain);
  }
  auto router = make_router(*url, std::move(ro), impl->router_counters);
  if (!router.ok()) return router.status();
  impl->router = std::move(router).value();
  ScriptInvoker::Options io;
  io.use_functions = options.use_functions;
  io.max_batch = options.max_batch;
  io.lanes = options.connections;
  impl->invoker = std::make_unique<ScriptInvoker>(*impl->router, io, std::move(support),
                                                  impl->invoker_counters);
  if (!options.lazy_connect) {
    if (Status s = impl->router->wait_ready(options.connect_timeout); !s.is_ok()) {
      return s;  // ~Impl closes the router
    }
  }
  impl->start_poller();
  return std::shared_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisStore::~RedisStore() = default;

void RedisStore::decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                   OpsCallback done) {
  if (Status s = validate_decide_many(ops, atomicity); !s.is_ok()) return done(s);
  auto& impl = *impl_;
  for (const StoreOp& op : ops) {
    if (op.kind == StoreOp::Kind::kReport && impl.envoy_layout(*op.policy)) {
      return done(Impl::envoy_report_refused(*op.policy));
    }
  }
  const std::string_view prefix = impl.options.key_prefix;
  if (atomicity == Atomicity::kAllOrNothing && ops.size() > 1) {
    // One script over every key. A cluster runs a script on one node and refuses keys of
    // different slots (CROSSSLOT): say so before sending anything.
    ScriptCall call = decide_many_call(prefix, ops, impl.now_arg());
    if (impl.router->routes_by_slot()) {
      const int slot = key_hash_slot(call.keys.front());
      for (const std::string& k : call.keys) {
        if (key_hash_slot(k) == slot) continue;
        return done(Status::invalid_argument(
            "all or nothing across keys of different hash slots is not possible in Redis "
            "Cluster (a script runs on one node); keys share a slot when they are one user key"));
      }
    }
    std::vector<int64_t> limits;
    limits.reserve(ops.size());
    for (const StoreOp& op : ops) limits.push_back(op.policy->limit());
    impl.run_script(call, std::move(limits),
                    [done = std::move(done)](std::vector<Decision> d) {
                      done(std::span<const Decision>(d));
                    });
    return;
  }
  if (ops.size() == 1) {
    // One op (acquire_async, peek_async, a lease op, the service's single decision): batched
    // with whatever else is queued, as its own call when a lane is free (Impl::decide).
    const StoreOp& op = ops[0];
    impl.decide(*op.policy, op.key, op.cost, algo::op_of(op.kind),
                [done = std::move(done)](Result<Decision> d) {
                  if (!d.ok()) return done(d.status());
                  done(std::span<const Decision>(&*d, 1));
                },
                op.lease, op.report);
    return;
  }
  // Independent: one call per op, pipelined; the last reply completes the call.
  struct Join {
    std::vector<Decision> out;
    std::atomic<size_t> left;
    OpsCallback done;
  };
  auto join = std::make_shared<Join>();
  join->out.resize(ops.size());
  join->left.store(ops.size(), std::memory_order_relaxed);
  join->done = std::move(done);
  auto arrive = [join](size_t i, const Decision& d) {
    join->out[i] = d;
    if (join->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      join->done(std::span<const Decision>(join->out));
    }
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    // Validated above: decide_op answers every failure by policy, never with an error.
    impl.decide_op(ops[i], [arrive, i](Result<Decision> d) { arrive(i, d.ok() ? *d : Decision{}); });
  }
}

void RedisStore::reset_async(const Policy& policy, std::string_view key, StatusCallback done) {
  if (Status s = validate_key(key); !s.is_ok()) return done(s);
  std::vector<std::string> argv = {"DEL"};
  if (impl_->envoy_layout(policy)) {  // the current window's counter
    argv.push_back(impl_->envoy_key_now(policy, key));
  } else {
    for (auto& k : reset_keys(impl_->options.key_prefix, policy, key)) argv.push_back(std::move(k));
  }
  const int slot =
      impl_->router->routes_by_slot() ? key_hash_slot(argv[1]) : kAnySlot;
  auto command = std::make_shared<const std::string>(encode_command(argv));
  impl_->router->send(slot, std::move(command), [impl = impl_.get(), done = std::move(done)](
                                                    const Status& error, const redisReply* reply) {
    auto& c = impl->counters;
    if (!error.is_ok()) {
      impl->count_error(error);
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
  });
}

RedisStoreCounters RedisStore::counters() const {
  const auto& c = impl_->counters;
  const auto& r = impl_->router_counters;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  RedisStoreCounters out;
  out.commands = get(c.commands);
  out.errors = get(c.errors);
  out.timeouts = get(c.timeouts);
  out.failed_open = get(c.failed_open);
  out.failed_closed = get(c.failed_closed);
  out.connects = get(r.connects);
  out.disconnects = get(r.disconnects);
  out.script_reloads = get(impl_->invoker_counters.script_reloads);
  out.batches = get(impl_->invoker_counters.batches);
  out.batched_decisions = get(impl_->invoker_counters.batched_decisions);
  out.moved = get(r.moved);
  out.asked = get(r.asked);
  out.cluster_retries = get(r.cluster_retries);
  out.topology_refreshes = get(r.topology_refreshes);
  out.evicted_keys = impl_->info->evicted_keys();
  out.unsafe_policy_connects = impl_->info->unsafe_nodes();
  return out;
}

size_t RedisStore::ready_connections() const { return impl_->router->ready_connections(); }

bool RedisStore::uses_functions() const { return impl_->invoker->uses_functions(); }

const RedisStoreOptions& RedisStore::options() const { return impl_->options; }

Status RedisStore::last_error() const { return impl_->router->last_error(); }

Status RedisStore::serving() const { return impl_->router->serving(); }

std::string RedisStore::eviction_policy() const { return impl_->info->eviction_policy(); }

}  // namespace ratelimit
