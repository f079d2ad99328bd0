// adaptive_mirror_test.cc — the Lua mirror of the adaptive concurrency limit (issue 30:
// src/redis/lua/adaptive.lua + concurrency.lua) against the C++ it mirrors, on a real
// redis-server:
//   - every sequence of the shared vectors (tests/vectors/adaptive_limit.json) through
//     adaptive.lua's update / update_at, EVALed with common.lua, field for field;
//   - the same random schedule of acquires, releases (ok, dropped, with and without a reported
//     latency), renews and expiries on a MemoryStore and a RedisStore, each on a manual clock at
//     the same times: every decision equal (reason, limit, remaining, reset, retry), for each
//     estimator, per sample and windowed, batched and not;
//   - two RedisStores (two instances of a fleet) on one Redis learn one limit: drops released
//     through one lower the limit the other answers.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "ratelimit/memory_store.h"
#include "ratelimit/redis_store.h"
#include "store_test_util.h"

namespace ratelimit::testing {
namespace {

using json = nlohmann::json;
using adaptive::AdaptiveConfig;
using adaptive::Estimator;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs one vector sequence in Lua: its state after every step, as
// {limit, limit_m, long_rtt_ns, samples, noload_rtt_us, window_count, window_end_us, probe_count}.
constexpr const char* kDriver = R"lua(
local seq = cjson.decode(ARGV[1])
local j = seq.config
local c = {estimator = adaptive.estimators[j.estimator or 'gradient2'], min_limit = j.min_limit,
           initial_limit = j.initial_limit, max_limit = j.max_limit, window_us = j.window_us or 0}
local s = adaptive.initial_state(c)
if seq.state then for k, v in pairs(seq.state) do s[k] = v end end
local out = {}
for i, x in ipairs(seq.steps) do
  local sample = {rtt_us = x.rtt_us, inflight = x.inflight, dropped = x.dropped}
  local got
  if x.now_us then got = adaptive.update_at(c, s, sample, x.now_us) else got = adaptive.update(c, s, sample) end
  out[i] = {got, s.limit_m, s.long_rtt_ns, s.samples, s.noload_rtt_us, s.window_count, s.window_end_us, s.probe_count}
end
return out
)lua";

TEST_F(RedisTest, AdaptiveLuaPassesTheSharedVectors) {
  const std::string lua = std::string(RATELIMIT_SOURCE_DIR) + "/src/redis/lua/";
  const std::string script = read_text(lua + "common.lua") + read_text(lua + "adaptive.lua") + kDriver;
  std::ifstream in(std::string(RATELIMIT_VECTORS_DIR) + "/adaptive_limit.json");
  const json v = json::parse(in);
  ASSERT_FALSE(v["sequences"].empty());
  const char* fields[] = {"limit_m", "long_rtt_ns", "samples", "noload_rtt_us", "window_count", "window_end_us",
                          "probe_count"};
  for (const json& seq : v["sequences"]) {
    SCOPED_TRACE(seq["name"].get<std::string>());
    auto r = client_->command({"EVAL", script, "0", seq.dump()});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_FALSE(r->is_error()) << r->str;
    ASSERT_EQ(r->elements.size(), seq["steps"].size());
    for (size_t i = 0; i < r->elements.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i + 1));
      const json& e = seq["steps"][i]["expect"];
      const auto& got = r->elements[i].elements;
      ASSERT_EQ(got.size(), 8u);
      EXPECT_EQ(got[0].integer, e["limit_m"].get<int64_t>() / adaptive::kMilli);
      for (size_t f = 0; f < 7; ++f) {
        if (e.contains(fields[f])) {
          EXPECT_EQ(got[f + 1].integer, e[fields[f]].get<int64_t>()) << fields[f];
        }
      }
    }
  }
}

Policy adaptive_policy(Estimator e, int64_t window_us) {
  auto p = Policy::adaptive_concurrency(AdaptiveConfig{e, 2, 8, 40, window_us}, Micros{50'000});
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p->with_name("db").value();
}

std::string show(const Result<Decision>& d) {
  if (!d.ok()) return d.status().to_string();
  std::ostringstream o;
  o << "allowed " << d->allowed << " reason " << static_cast<int>(d->reason) << " limit " << d->limit << " remaining "
    << d->remaining << " reset " << d->reset_after.count() << " retry " << d->retry_after.count();
  return o.str();
}

// The same schedule on both stores: 3 keys, leases of cost 1-2, releases ok / dropped / with a
// latency, renews, and time steps of 0.1-30 ms per sample, 0.1-1.6 ms windowed (leases live
// 50 ms, so some expire unreleased).
void same_schedule(Estimator e, int64_t window_us, size_t max_batch, uint32_t seed) {
  SCOPED_TRACE("estimator " + std::string(adaptive::estimator_name(e)) + " window " + std::to_string(window_us) +
               " max_batch " + std::to_string(max_batch) + " seed " + std::to_string(seed));
  const Policy p = adaptive_policy(e, window_us);
  ManualClock mclock{Micros{1'000'000}}, rclock{Micros{1'000'000}};
  MemoryStoreOptions mo;
  mo.clock = &mclock;
  MemoryStore memory(mo);
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok());
  auto ro = options_for(*url);
  ro.test_clock = &rclock;
  ro.max_batch = max_batch;
  ro.key_prefix = unique_prefix("adaptive-mirror");
  auto redis = must_connect(ro);
  ASSERT_NE(redis, nullptr);
  std::mt19937 rng(seed);
  struct Held {
    std::string key;
    LeaseId mem, red;
  };
  std::vector<Held> held;
  int learned_moves = 0;
  int64_t first_limit = -1;
  for (int step = 0; step < 600; ++step) {
    // Windowed: steps short enough that a window holds the 10 samples it needs to move.
    const auto dt = Micros{100 + static_cast<int64_t>(rng() % (window_us == 0 ? 30'000 : 1'500))};
    mclock.advance(dt);
    rclock.advance(dt);
    const auto what = static_cast<uint32_t>(rng() % 10);
    Result<Decision> a = Status::internal("unset"), b = Status::internal("unset");
    if (what < 5 || held.empty()) {
      const std::string key = "k" + std::to_string(rng() % 3);
      const int64_t cost = 1 + rng() % 2;
      a = memory.decide_one({&p, key, cost, StoreOp::Kind::kAcquire});
      b = redis->decide_one({&p, key, cost, StoreOp::Kind::kAcquire});
      if (a.ok() && b.ok() && a->allowed && b->allowed) held.push_back({key, a->lease, b->lease});
    } else {
      const size_t i = rng() % held.size();
      const Held h = held[i];
      StoreOp op{&p, h.key, 1, what == 9 ? StoreOp::Kind::kRenew : StoreOp::Kind::kRelease};
      if (what >= 7 && what < 9) op.report = {what == 8, static_cast<int64_t>(rng() % 40'000)};
      if (what == 6) op.report.dropped = true;
      op.lease = h.mem;
      a = memory.decide_one(op);
      op.lease = h.red;
      b = redis->decide_one(op);
      if (op.kind == StoreOp::Kind::kRelease) held.erase(held.begin() + static_cast<ptrdiff_t>(i));
    }
    ASSERT_EQ(show(a), show(b)) << "step " << step;
    if (a.ok()) {
      if (first_limit < 0) first_limit = a->limit;
      if (a->limit != first_limit) ++learned_moves;
    }
  }
  EXPECT_GT(learned_moves, 0) << "the schedule never moved the learned limit: it tests nothing";
}

TEST(AdaptiveMirror, RedisDecidesEveryLeaseOpAsTheMemoryStore) {
  uint32_t seed = 1;
  for (Estimator e : {Estimator::kAimd, Estimator::kGradient2, Estimator::kVegas}) {
    for (int64_t window : {int64_t{0}, int64_t{30'000}}) {
      for (size_t batch : {size_t{1}, size_t{64}}) same_schedule(e, window, batch, seed++);
    }
  }
}

// Issue 30's "two ratelimitd on one Redis learn one limit", at the store: two stores (two
// processes' connections) on one Redis; drops released through one lower the limit the other
// answers, and the other's samples move the same state.
TEST(AdaptiveMirror, TwoStoresOnOneRedisLearnOneLimit) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok());
  auto o = options_for(*url);
  o.key_prefix = unique_prefix("adaptive-fleet");
  auto one = must_connect(o);
  auto two = must_connect(o);
  ASSERT_TRUE(one && two);
  const Policy p = adaptive_policy(Estimator::kAimd, 0);  // per sample: 8 -> 0.9 per drop
  auto first = two->acquire(p, "db", 1);
  ASSERT_TRUE(first.ok() && first->allowed);
  EXPECT_EQ(first->limit, 8) << "initial_limit";
  ASSERT_TRUE(two->release(p, "db", first->lease).ok());
  for (int i = 0; i < 5; ++i) {
    auto d = one->acquire(p, "db", 1);
    ASSERT_TRUE(d.ok() && d->allowed) << show(d);
    StoreOp release{&p, "db", 1, StoreOp::Kind::kRelease};
    release.lease = d->lease;
    release.report.dropped = true;
    ASSERT_TRUE(one->decide_one(release).ok());
  }
  // 8000 · 0.9^5 = 4723 milli-units (each step floored): limit 4, through the other store.
  auto seen = two->peek(p, "db", 1);
  ASSERT_TRUE(seen.ok()) << seen.status().to_string();
  EXPECT_EQ(seen->limit, 4) << show(seen);
  EXPECT_EQ(seen->remaining, 4);
  // And the other way: AIMD grows by one per sample while at least half the limit is in use.
  std::vector<LeaseId> leases;
  for (int i = 0; i < 3; ++i) {
    auto d = two->acquire(p, "db", 1);
    ASSERT_TRUE(d.ok() && d->allowed) << show(d);
    leases.push_back(d->lease);
  }
  for (const LeaseId& l : leases) ASSERT_TRUE(two->release(p, "db", l).ok());
  auto after = one->peek(p, "db", 1);
  ASSERT_TRUE(after.ok());
  // Leases granted at 1, 2 and 3 in use of 4: only the third had at least half the limit in use.
  EXPECT_EQ(after->limit, 5) << show(after);
}

}  // namespace
}  // namespace ratelimit::testing
