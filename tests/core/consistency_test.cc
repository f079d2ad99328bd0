// consistency_test.cc — the lease/async math (include/ratelimit/consistency.h): the shared
// vectors against the pure functions, local decisions, slice sizing, policy validation, and the
// two bounds as properties: N simulated instances sharing one state — lease never admits past
// the limit, async stays within (instances − 1) × ⌈rate × sync_interval⌉.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "core_test_util.h"
#include "distributed_vectors.h"
#include "ratelimit/consistency.h"

namespace ratelimit {
namespace {

using testing::must;

Policy with_mode(Policy p, Consistency mode, int64_t lease_max = 0,
                 Micros sync = Micros{100'000}, Micros ttl = Micros{1'000'000}) {
  ConsistencyOptions o;
  o.mode = mode;
  o.lease_max = lease_max;
  o.sync_interval = sync;
  o.lease_ttl = ttl;
  return must(p.with_consistency(o));
}

TEST(ConsistencyVectors, PureFunctionsMatchHandWorkedVectors) {
  auto cases = vectors::load_distributed(std::string(RATELIMIT_VECTORS_DIR) + "/distributed.json");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  auto failures = vectors::run_distributed_pure(*cases);
  EXPECT_TRUE(failures.empty()) << vectors::format_failures(failures);
}

TEST(ConsistencyPolicy, ModesAreDefinedForWindowCountsOnly) {
  ConsistencyOptions lease;
  lease.mode = Consistency::kLease;
  EXPECT_TRUE(must(Policy::fixed_window(10, Micros{1'000'000})).with_consistency(lease).ok());
  EXPECT_TRUE(must(Policy::sliding_window_counter(10, Micros{1'000'000})).with_consistency(lease).ok());
  for (auto p : {must(Policy::token_bucket(1, 10)), must(Policy::leaky_bucket(1, 10)),
                 must(Policy::sliding_window_log(10, Micros{1'000'000}))}) {
    auto r = p.with_consistency(lease);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("fixed_window and sliding_window_counter only"), std::string::npos);
  }
  auto every_hit = must(Policy::fixed_window_every_hit(10, Micros{1'000'000})).with_consistency(lease);
  EXPECT_FALSE(every_hit.ok());
  auto denied = must(Policy::fixed_window(10, Micros{1'000'000})).with_count_denied().with_consistency(lease);
  EXPECT_FALSE(denied.ok());
  // Out of range values name the field.
  ConsistencyOptions bad = lease;
  bad.lease_max = 11;
  EXPECT_NE(must(Policy::fixed_window(10, Micros{1'000'000})).with_consistency(bad).status().message().find("lease_max"),
            std::string::npos);
  bad = lease;
  bad.sync_interval = Micros{999};
  EXPECT_NE(must(Policy::fixed_window(10, Micros{1'000'000})).with_consistency(bad).status().message().find("sync_interval"),
            std::string::npos);
  bad = lease;
  bad.lease_ttl = Micros{0};
  EXPECT_NE(must(Policy::fixed_window(10, Micros{1'000'000})).with_consistency(bad).status().message().find("lease_ttl"),
            std::string::npos);
  EXPECT_EQ(parse_consistency("async").value(), Consistency::kAsync);
  EXPECT_FALSE(parse_consistency("eventual").ok());
  // Exact is the default, and turning on count-denied mode returns a policy to it.
  EXPECT_EQ(must(Policy::fixed_window(10, Micros{1'000'000})).consistency().mode, Consistency::kExact);
  auto leased = with_mode(must(Policy::fixed_window(10, Micros{1'000'000})), Consistency::kLease);
  EXPECT_EQ(leased.with_count_denied().consistency().mode, Consistency::kExact);
}

TEST(DecideLocal, AsyncAddsUnpushedHitsAndLeaseFreesUnusedUnits) {
  const Policy p = with_mode(must(Policy::fixed_window(10, Micros{1'000'000})), Consistency::kAsync);
  const algo::SharedView view{100'000, 0, 0, 6, 0};
  const algo::LocalUnits pending[] = {{0, 3}};
  Decision d = algo::decide_local(p, view, pending, 200'000, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after.count(), 800'000);
  d = algo::decide_local(p, view, pending, 200'000, 2);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after.count(), 800'000);
  // Hits of a window that has ended count for nothing in the next one.
  d = algo::decide_local(p, view, pending, 1'000'000, 10);
  EXPECT_TRUE(d.allowed);
  // Lease: 4 of the view's 10 are this instance's unspent slice.
  const algo::SharedView full{100'000, 0, 0, 10, 4};
  const algo::LocalUnits held[] = {{0, -4}};
  EXPECT_TRUE(algo::decide_local(p, full, held, 200'000, 4).allowed);
  EXPECT_FALSE(algo::decide_local(p, full, held, 200'000, 5).allowed);
}

TEST(SliceSize, FollowsDemandWithinCostAndLeaseMax) {
  const Policy p = with_mode(must(Policy::fixed_window(1000, Micros{1'000'000})), Consistency::kLease, 100);
  EXPECT_EQ(algo::slice_size(p, 0, 1'000'000, 1), 1);          // quiet: just the request
  EXPECT_EQ(algo::slice_size(p, 50, 1'000'000, 1), 50);        // 50/s over 1 s
  EXPECT_EQ(algo::slice_size(p, 50, 100'000, 1), 5);           // ... over 100 ms
  EXPECT_EQ(algo::slice_size(p, 1e9, 1'000'000, 1), 100);      // capped at lease_max
  EXPECT_EQ(algo::slice_size(p, 1e9, 1'000'000, 250), 250);    // a larger request asks its cost
  EXPECT_EQ(algo::slice_size(p, 2, 1'000'000, 7), 7);
  const Policy d = with_mode(must(Policy::fixed_window(1000, Micros{1'000'000})), Consistency::kLease);
  EXPECT_EQ(algo::resolved_lease_max(d), 50);                  // default: limit / 20
}

TEST(Bounds, Formulas) {
  EXPECT_EQ(algo::async_over_admission_bound(1, 1000, Micros{100'000}, Micros{1'000}, 50), 0);
  EXPECT_EQ(algo::async_over_admission_bound(3, 1000, Micros{100'000}, Micros{1'000}, 1'000'000), 2 * 101);
  EXPECT_EQ(algo::async_over_admission_bound(3, 1000, Micros{100'000}, Micros{1'000}, 50), 100);
  const Policy p = with_mode(must(Policy::fixed_window(1000, Micros{1'000'000})), Consistency::kLease, 30);
  EXPECT_EQ(algo::lease_under_admission_bound(3, p), 60);
}

// One simulated instance of lease mode: the decorator's policy in a few lines.
struct LeaseInstance {
  int64_t ws = -1, left = 0, valid_until = 0, granted_at = 0, granted = 0;
  double demand = 0;
};

// N instances on one shared state, requests of random cost at random times, each decided
// locally from its slice or by one reserve call (giving back what is left). The true count of
// each window (fixed) or the true estimate at each admission (sliding counter) never passes
// the limit.
void lease_never_over_admits(const Policy& p, uint32_t seed) {
  std::mt19937 rng(seed);
  const int n = 3;
  std::vector<LeaseInstance> inst(n);
  algo::AlgorithmState shared = algo::fresh_state(p);
  const int64_t window = p.window().count();
  std::map<int64_t, int64_t> admitted;  // window start -> units really admitted
  int64_t t = 0, total = 0, denied = 0;
  for (int i = 0; i < 20'000; ++i) {
    t += std::uniform_int_distribution<int64_t>(0, 400)(rng);
    LeaseInstance& me = inst[std::uniform_int_distribution<int>(0, n - 1)(rng)];
    const int64_t cost = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    const int64_t ws = t - t % window;
    bool ok = me.ws == ws && t < me.valid_until && me.left >= cost;
    if (!ok) {
      const int64_t life = std::min<int64_t>(p.consistency().lease_ttl.count(), ws + window - t);
      if (me.granted > 0 && t > me.granted_at) {
        me.demand = static_cast<double>(me.granted - me.left) * 1e6 / static_cast<double>(t - me.granted_at);
      }
      const int64_t want = algo::slice_size(p, me.demand, life, cost);
      const algo::SharedView v = algo::reserve(p, shared, t, me.ws, me.left, want);
      me = {v.window_start_us, v.granted, std::min(t + p.consistency().lease_ttl.count(), ws + window), t,
            v.granted, me.demand};
      ok = me.left >= cost;
    }
    if (!ok) {
      ++denied;
      continue;
    }
    me.left -= cost;
    total += cost;
    admitted[ws] += cost;
    if (p.algorithm() == Algorithm::kFixedWindow) {
      ASSERT_LE(admitted[ws], p.limit()) << "window " << ws;
    } else {
      const int64_t prev = admitted.count(ws - window) ? admitted[ws - window] : 0;
      const int64_t est = admitted[ws] + prev * (window - (t - ws)) / window;
      ASSERT_LE(est, p.limit()) << "at " << t;
    }
  }
  EXPECT_GT(total, 0);
  EXPECT_GT(denied, 0);  // the limit was reached: the property was tested at the edge
}

TEST(LeaseProperty, NeverOverAdmitsFixedWindow) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    lease_never_over_admits(with_mode(must(Policy::fixed_window(200, Micros{100'000})), Consistency::kLease, 20,
                                      Micros{10'000}, Micros{30'000}), seed);
  }
}

TEST(LeaseProperty, NeverOverAdmitsSlidingWindowCounter) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    lease_never_over_admits(with_mode(must(Policy::sliding_window_counter(200, Micros{100'000})),
                                      Consistency::kLease, 20, Micros{10'000}, Micros{30'000}), seed);
  }
}

// Async: each instance decides on its view plus its unpushed hits and pushes twice every
// sync_interval (its own phase), as DistributedStore does; requests arrive at each instance at most `rate` per second.
// Per window the units admitted beyond the limit stay within async_over_admission_bound.
TEST(AsyncProperty, OverAdmissionWithinBound) {
  const int n = 3;
  const Micros sync{20'000};
  const double rate = 2000;  // per instance: one request every 500 us at most
  const Policy p = with_mode(must(Policy::fixed_window(300, Micros{200'000})), Consistency::kAsync, 0, sync);
  const int64_t bound = algo::async_over_admission_bound(n, rate, sync, Micros{0}, p.limit());
  std::mt19937 rng(7);
  struct Inst {
    algo::SharedView view;
    std::map<int64_t, int64_t> pending;
    int64_t next_push, next_request;
  };
  std::vector<Inst> inst(n);
  for (int i = 0; i < n; ++i) inst[i] = {{}, {}, 1 + i * 7'000, i * 100};
  algo::AlgorithmState shared = algo::fresh_state(p);
  std::map<int64_t, int64_t> admitted;
  int64_t worst = 0;
  for (int64_t t = 0; t < 5'000'000; ++t) {
    for (Inst& me : inst) {
      if (t == me.next_push) {
        for (auto& [w, units] : me.pending) me.view = algo::add_hits(p, shared, t, w, units);
        if (me.pending.empty()) me.view = algo::add_hits(p, shared, t, 0, 0);
        me.pending.clear();
        me.next_push += sync.count() / 2;  // as DistributedStore: twice per interval
      }
      if (t == me.next_request) {
        std::vector<algo::LocalUnits> local;
        for (auto& [w, units] : me.pending) local.push_back({w, units});
        if (algo::decide_local(p, me.view, local, t, 1).allowed) {
          const int64_t ws = t - t % p.window().count();
          me.pending[ws] += 1;
          worst = std::max(worst, ++admitted[ws] - p.limit());
        }
        me.next_request += 500 + std::uniform_int_distribution<int64_t>(0, 300)(rng);
      }
    }
  }
  EXPECT_GT(worst, 0) << "the test never reached the limit";
  EXPECT_LE(worst, bound) << "over-admission past the bound";
  RecordProperty("worst", static_cast<int>(worst));
  RecordProperty("bound", static_cast<int>(bound));
}

}  // namespace
}  // namespace ratelimit
