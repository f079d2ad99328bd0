// distributed_test.cc — the simulator's distributed model (distributed.h) against what the
// modes promise (include/ratelimit/consistency.h): exact is the replay's answer, lease never
// admits past the limit in any window, async and regions stay within their documented
// bounds, one region is exact, and at a steady load on a large limit lease and async need at
// most 0.05 store calls per decision (issue 19's target) — on Poisson streams of several keys
// and on bursts, across instance counts, slice sizes and sync intervals.
#include "distributed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "py_random.h"
#include "ratelimit/consistency.h"
#include "run.h"

namespace ratelimit::sim {
namespace {

struct Request {
  int64_t t_us;
  std::string key;
};

// `keys` clients, each Poisson at `rate` per second for `seconds`, merged in time order, plus
// a burst of `burst` requests on key 0 at the middle.
std::vector<Request> stream(uint64_t seed, int keys, double rate, double seconds, int burst) {
  PyRandom rng(seed);
  std::vector<Request> out;
  for (int k = 0; k < keys; ++k) {
    for (double t = rng.expovariate(rate); t < seconds; t += rng.expovariate(rate)) {
      out.push_back({std::llround(t * 1e6) + 1'000'000, "k" + std::to_string(k)});
    }
  }
  for (int i = 0; i < burst; ++i) out.push_back({static_cast<int64_t>(seconds / 2 * 1e6) + 1'000'000 + i * 100, "k0"});
  std::stable_sort(out.begin(), out.end(), [](const Request& a, const Request& b) { return a.t_us < b.t_us; });
  return out;
}

DistributedReport run(const std::vector<Request>& requests, const PolicyParams& params,
                      const DistributedOptions& o) {
  auto policies = make_policies(params);
  EXPECT_TRUE(policies.ok());
  auto d = Distributed::create((*policies)[0], (*policies)[2], o);
  EXPECT_TRUE(d.ok()) << d.status().message();
  for (const Request& r : requests) d->add(r.t_us, r.key, 1);
  return d->finish();
}

const DistributedResult& row(const DistributedReport& r, const std::string& algorithm,
                             const std::string& mode) {
  for (const DistributedResult& x : r.results) {
    if (x.algorithm == algorithm && x.mode == mode) return x;
  }
  ADD_FAILURE() << algorithm << " " << mode;
  return r.results.front();
}

TEST(Distributed, ExactIsTheReplayAndOneRegionIsExact) {
  for (char p : {'A', 'B', 'C'}) {
    RunOptions o;
    o.patterns = {p};
    o.distributed.instances = 3;
    auto r = simulate(o);
    ASSERT_TRUE(r.ok());
    const Report& rep = r->front();
    ASSERT_TRUE(rep.distributed.has_value());
    EXPECT_EQ(row(*rep.distributed, "fixed_window", "exact").admitted, rep.algorithms[0].admitted) << p;
    EXPECT_EQ(row(*rep.distributed, "sliding_window_counter", "exact").admitted,
              rep.algorithms[2].admitted)
        << p;
    for (const char* a : {"fixed_window", "sliding_window_counter"}) {
      const DistributedResult& one = row(*rep.distributed, a, "regions");
      EXPECT_EQ(one.over + one.under, 0) << p << " " << a;  // one region: its store is exact
      EXPECT_DOUBLE_EQ(static_cast<double>(row(*rep.distributed, a, "exact").store_calls),
                       static_cast<double>(one.decisions));
    }
  }
}

// The matrix the bounds must survive.
struct Case {
  int64_t instances, regions, lease_max, limit;
  Micros sync;
  double rate;
  Micros cross_rtt{50'000};
};

TEST(Distributed, LeaseNeverOverAdmitsAndAsyncAndRegionsStayWithinTheirBounds) {
  const std::vector<Case> cases = {
      {2, 1, 0, 20, Micros{100'000}, 15},    {3, 1, 1, 20, Micros{100'000}, 30},
      {5, 1, 4, 20, Micros{50'000}, 40},     {4, 2, 0, 100, Micros{200'000}, 120},
      {7, 3, 10, 100, Micros{100'000}, 200}, {3, 3, 0, 50, Micros{500'000}, 90},
      // A cross-region round trip of a sync_interval or more: a read still out makes the next
      // tick skip the key, so the regions bound takes 2 × rtt (regions.h).
      {4, 2, 0, 100, Micros{20'000}, 150, Micros{100'000}}, {6, 3, 0, 60, Micros{50'000}, 120, Micros{150'000}},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    PolicyParams params;
    params.window_limit = c.limit;
    DistributedOptions o;
    o.instances = c.instances;
    o.regions = c.regions;
    o.lease_max = c.lease_max;
    o.sync_interval = c.sync;
    o.cross_rtt = c.cross_rtt;
    const auto requests = stream(seed++, 4, c.rate, 20, static_cast<int>(c.limit) * 2);
    const DistributedReport r = run(requests, params, o);
    const std::string what = "instances " + std::to_string(c.instances) + " regions " +
                             std::to_string(c.regions) + " limit " + std::to_string(c.limit);
    for (const char* a : {"fixed_window", "sliding_window_counter"}) {
      const DistributedResult& lease = row(r, a, "lease");
      EXPECT_EQ(lease.worst_window_over, 0) << what << " " << a;
      EXPECT_LE(lease.admitted, row(r, a, "exact").admitted + lease.over) << what;
      EXPECT_EQ(row(r, a, "exact").worst_window_over, 0) << what << " " << a;
    }
    // Over-admission per window against the bound (fixed_window: a window's count is what
    // the bound speaks of).
    const DistributedResult& async = row(r, "fixed_window", "async");
    EXPECT_LE(async.worst_window_over, async.bound) << what;
    const DistributedResult& regions = row(r, "fixed_window", "regions");
    EXPECT_LE(regions.worst_window_over, regions.bound) << what;
    // The views of the other regions are reads of their counts, never above them: a region
    // stops only when the global count has reached the limit, so no window falls short.
    EXPECT_EQ(regions.worst_window_under, 0) << what;
    EXPECT_EQ(regions.sync_messages > 0, c.regions > 1) << what;
    // Lease under-admission in a window: at most the bound, plus what exact admitted that the
    // lease mode had already admitted earlier in the stream's other windows (none here: the
    // lease bound is per moment; a window's shortfall is checked against it).
    EXPECT_LE(row(r, "fixed_window", "lease").worst_window_under,
              row(r, "fixed_window", "lease").bound)
        << what;
  }
}

// The regions bound with a cross-region round trip of a sync_interval or more: one read per
// (key, region) in flight makes reads ~rtt apart, so a view ages to sync + 1.5 × rtt (symmetric
// links) and a region over-admits past the (sync + rtt) formula — 70 here against its 60 — but
// within the bound regions.h now gives (2 × rtt). compare_distributed.py measured the same on
// real daemons (64 … 68, simulated 68 … 69; ctest sim_compare_regions_slow_link).
TEST(Distributed, RegionsBoundCoversARoundTripLongerThanTheInterval) {
  std::vector<Request> requests;
  for (int w = 0; w < 6; ++w) {
    for (int i = 0; i < 1000; ++i) requests.push_back({1'000'000LL * (w + 1) + i * 1'000LL, "hot"});
  }
  PolicyParams params;
  params.window_limit = 429;
  DistributedOptions o;
  o.instances = 2;
  o.regions = 2;
  o.sync_interval = Micros{20'000};
  o.cross_rtt = Micros{100'000};
  const DistributedResult& r = row(run(requests, params, o), "fixed_window", "regions");
  const int64_t one_rtt = algo::async_over_admission_bound(2, 500, o.sync_interval, o.cross_rtt, 429);
  EXPECT_EQ(one_rtt, 60);
  EXPECT_GT(r.worst_window_over, one_rtt) << "the case that needs the doubled round trip";
  EXPECT_LE(r.worst_window_over, r.bound);
  EXPECT_EQ(r.worst_window_under, 0);
}

// One hot key at a steady 1000/s on 2000 per second, two instances: a slice of up to 100 units
// (limit / 20) serves ~100 decisions per reserve, and async pushes 20 times a second per
// instance (twice per sync_interval) — each at most 0.05 store calls per decision, where exact
// makes one.
TEST(Distributed, LeaseAndAsyncNeedAtMostOneTwentiethOfTheStoreCalls) {
  std::vector<Request> requests;
  for (int i = 0; i < 30'000; ++i) requests.push_back({1'000'000 + i * 1'000LL, "hot"});
  PolicyParams params;
  params.window_limit = 2000;
  DistributedOptions o;
  o.instances = 2;
  const DistributedReport r = run(requests, params, o);
  for (const char* a : {"fixed_window", "sliding_window_counter"}) {
    const DistributedResult& exact = row(r, a, "exact");
    EXPECT_EQ(exact.store_calls, exact.decisions);
    for (const char* mode : {"lease", "async"}) {
      const DistributedResult& m = row(r, a, mode);
      EXPECT_LE(static_cast<double>(m.store_calls), 0.05 * static_cast<double>(m.decisions))
          << a << " " << mode << ": " << m.store_calls << " calls";
      EXPECT_EQ(m.admitted, exact.admitted) << a << " " << mode;  // under the limit: all pass
    }
    EXPECT_EQ(row(r, a, "lease").latency_p50_us, 0);  // decided from the slice
  }
}

TEST(Distributed, OutputsAndBadSettings) {
  RunOptions o;
  o.patterns = {'B'};
  o.distributed.instances = 2;
  auto r = simulate(o);
  ASSERT_TRUE(r.ok());
  const std::string table = render_table(*r);
  EXPECT_NE(table.find("distributed: 2 instances (requests round-robin), 1 region"), std::string::npos)
      << table;
  EXPECT_NE(table.find("fixed_window            lease"), std::string::npos) << table;
  DistributedOptions bad;
  bad.instances = 2;
  bad.regions = 3;
  EXPECT_NE(validate(bad).message().find("--regions"), std::string::npos);
  bad.regions = 1;
  bad.sync_interval = Micros{0};
  EXPECT_NE(validate(bad).message().find("--sync-interval"), std::string::npos);
  RunOptions plain;
  plain.patterns = {'B'};
  auto p = simulate(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->front().distributed.has_value());
}

}  // namespace
}  // namespace ratelimit::sim
