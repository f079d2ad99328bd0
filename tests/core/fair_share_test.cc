// fair_share_test.cc — RLQS fair shares (include/ratelimit/fair_share.h): the shared vectors
// tests/vectors/fair_share.json against the pure functions and BucketShares, and the division's
// properties on random demands (Σ = capacity, nobody below min(demand, equal share), nobody
// above its demand when the bucket is oversubscribed, input order irrelevant).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ratelimit/fair_share.h"

namespace ratelimit::fair_share {
namespace {

using json = nlohmann::json;

json vectors() {
  std::ifstream in(std::string(RATELIMIT_VECTORS_DIR) + "/fair_share.json");
  return json::parse(in);
}

Assignment::Kind kind_of(const std::string& k) {
  if (k == "token_bucket") return Assignment::Kind::kTokenBucket;
  if (k == "allow_all") return Assignment::Kind::kAllowAll;
  return Assignment::Kind::kDenyAll;
}

Assignment assignment_of(const json& j) {
  Assignment a;
  a.kind = kind_of(j["kind"]);
  a.tokens_per_fill = j.value("tokens_per_fill", int64_t{0});
  a.max_tokens = j.value("max_tokens", int64_t{0});
  a.fill_interval_s = j.value("fill_interval_s", int64_t{0});
  a.ttl_s = j.value("ttl_s", int64_t{0});
  a.share_mrps = j.value("share_mrps", int64_t{0});
  return a;
}

std::string show(const Assignment& a) {
  return "kind " + std::to_string(static_cast<int>(a.kind)) + " tokens_per_fill " + std::to_string(a.tokens_per_fill) +
         " max_tokens " + std::to_string(a.max_tokens) + " fill " + std::to_string(a.fill_interval_s) + " ttl " +
         std::to_string(a.ttl_s) + " share " + std::to_string(a.share_mrps);
}

TEST(FairShareVectors, Demand) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["demand"].empty());
  for (const json& c : v["demand"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto d = report_demand(c["allowed"], c["denied"], c["elapsed_us"]);
    const json& e = c["expect_mrps"];
    if (e.is_string()) {
      ASSERT_FALSE(d.ok());
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    } else if (e.is_null()) {
      ASSERT_TRUE(d.ok());
      EXPECT_FALSE(d->has_value());
    } else {
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      ASSERT_TRUE(d->has_value());
      EXPECT_EQ(**d, e.get<int64_t>());
    }
  }
}

TEST(FairShareVectors, Capacity) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["capacity"].empty());
  for (const json& c : v["capacity"]) {
    SCOPED_TRACE(c.dump());
    auto r = capacity_mrps(c["limit"], c["unit_s"]);
    if (c["expect_mrps"].is_string()) {
      EXPECT_FALSE(r.ok());
    } else {
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(*r, c["expect_mrps"].get<int64_t>());
    }
  }
}

TEST(FairShareVectors, Shares) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["shares"].empty());
  for (const json& c : v["shares"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<std::optional<int64_t>> demands;
    for (const json& d : c["demands_mrps"]) {
      demands.push_back(d.is_null() ? std::nullopt : std::optional<int64_t>(d.get<int64_t>()));
    }
    EXPECT_EQ(max_min_shares(c["capacity_mrps"], demands), c["expect_mrps"].get<std::vector<int64_t>>());
  }
}

TEST(FairShareVectors, TokenBucket) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["token_bucket"].empty());
  for (const json& c : v["token_bucket"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::optional<Assignment> previous;
    if (c.contains("previous")) {
      previous = assignment_of(c["previous"]);
    }
    Assignment want = assignment_of(c["expect"]);
    want.share_mrps = c["share_mrps"];
    const Assignment got = token_bucket_for(c["share_mrps"], previous ? &*previous : nullptr);
    EXPECT_EQ(got, want) << show(got);
  }
}

TEST(FairShareVectors, Ttl) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["ttl"].empty());
  for (const json& c : v["ttl"]) {
    EXPECT_EQ(assignment_ttl_s(c["interval_s"]), c["expect_s"].get<int64_t>()) << c.dump();
  }
}

TEST(FairShareVectors, Sequences) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["sequences"].empty());
  for (const json& c : v["sequences"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    BucketShares bucket;
    int step = 0;
    for (const json& s : c["steps"]) {
      SCOPED_TRACE("step " + std::to_string(step++));
      if (s.contains("remote")) {
        std::vector<RemoteClient> remote;
        for (const json& r : s["remote"]) {
          remote.push_back({r["demand_mrps"].is_null() ? std::nullopt : std::optional<int64_t>(r["demand_mrps"]),
                            r["expires_at_us"].get<int64_t>()});
        }
        bucket.set_remote(std::move(remote));
      }
      auto a = bucket.report(s["client"], s["allowed"], s["denied"], s["elapsed_us"], c["capacity_mrps"], s["t_us"],
                             c.value("default_interval_s", kDefaultIntervalS));
      if (s["expect"].is_string()) {
        EXPECT_FALSE(a.ok());
      } else {
        ASSERT_TRUE(a.ok()) << a.status().to_string();
        EXPECT_EQ(*a, assignment_of(s["expect"])) << show(*a);
      }
      if (s.contains("expect_clients")) {
        EXPECT_EQ(bucket.clients(), s["expect_clients"].get<size_t>());
      }
      if (s.contains("expect_remote")) {
        EXPECT_EQ(bucket.remote_clients(), s["expect_remote"].get<size_t>());
      }
    }
  }
}

// What an instance publishes of a bucket (the instances rule): its clients' demands (unknown
// until a report shows one) and expiries, without the clients whose TTL passed.
TEST(FairShareInstances, LocalIsWhatTheOthersSee) {
  BucketShares bucket;
  ASSERT_TRUE(bucket.report(1, 0, 0, 0, 300'000, 0).ok());
  ASSERT_TRUE(bucket.report(2, 0, 0, 0, 300'000, 500'000).ok());
  ASSERT_TRUE(bucket.report(1, 10, 0, 1'000'000, 300'000, 1'000'000).ok());
  bucket.set_remote({{100'000, 10'000'000}});
  EXPECT_EQ(bucket.local(1'000'000), (std::vector<RemoteClient>{{10'000, 3'000'000}, {std::nullopt, 2'500'000}}));
  EXPECT_EQ(bucket.local(2'600'000), (std::vector<RemoteClient>{{10'000, 3'000'000}}));
  EXPECT_EQ(bucket.remote_clients(), 1U);  // the remote one is still valid
  EXPECT_TRUE(bucket.local(3'000'000).empty());
}

// Two instances dividing one capacity, each seeing the other's clients: their own clients'
// assignments sum to at most the capacity (the shares are one division, split by instance).
TEST(FairShareInstances, TwoViewsOfOneDivisionSumToTheCapacity) {
  std::mt19937_64 rng(2929);
  for (int round = 0; round < 2000; ++round) {
    const int64_t capacity = 1'000 + static_cast<int64_t>(rng() % 1'000'000);
    BucketShares a, b;
    std::vector<int64_t> da, db;
    for (size_t i = 0, n = 1 + rng() % 4; i < n; ++i) da.push_back(static_cast<int64_t>(rng() % 1'000));  // rps
    for (size_t i = 0, n = 1 + rng() % 4; i < n; ++i) db.push_back(static_cast<int64_t>(rng() % 1'000));
    // Everyone has reported once (t = 0, unknown) and a demand at t = 1 s on its own instance.
    for (int t = 0; t < 2; ++t) {
      const int64_t now = t * 1'000'000;
      for (size_t i = 0; i < da.size(); ++i) ASSERT_TRUE(a.report(i, t ? da[i] : 0, 0, now, capacity, now).ok());
      for (size_t i = 0; i < db.size(); ++i) ASSERT_TRUE(b.report(i, t ? db[i] : 0, 0, now, capacity, now).ok());
    }
    // The exchange, then every client's next report (one a second, demands unchanged).
    a.set_remote(b.local(1'500'000));
    b.set_remote(a.local(1'500'000));
    int64_t sum = 0;
    for (size_t i = 0; i < da.size(); ++i) sum += a.report(i, da[i], 0, 1'000'000, capacity, 2'000'000)->share_mrps;
    for (size_t i = 0; i < db.size(); ++i) sum += b.report(i, db[i], 0, 1'000'000, capacity, 2'000'000)->share_mrps;
    // One division of the capacity; the one-unit remainders may fall differently in each view.
    EXPECT_LE(sum, capacity + static_cast<int64_t>(da.size() + db.size())) << "round " << round;
    EXPECT_GE(sum, capacity - static_cast<int64_t>(da.size() + db.size())) << "round " << round;
  }
}

TEST(FairShareProperties, RandomDemands) {
  std::mt19937_64 rng(29);
  for (int round = 0; round < 20000; ++round) {
    const size_t n = 1 + rng() % 12;
    const int64_t capacity = static_cast<int64_t>(rng() % 2'000'000);
    std::vector<std::optional<int64_t>> demands;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 7 == 0) {
        demands.emplace_back();
      } else {
        demands.emplace_back(static_cast<int64_t>(rng() % (rng() % 2 ? 1'000 : 1'000'000)));
      }
    }
    const std::vector<int64_t> shares = max_min_shares(capacity, demands);
    ASSERT_EQ(shares.size(), n);
    const int64_t equal = capacity / static_cast<int64_t>(n);
    int64_t want_sum = 0;
    for (size_t i = 0; i < n; ++i) want_sum += demands[i].value_or(equal);
    EXPECT_EQ(std::accumulate(shares.begin(), shares.end(), int64_t{0}), capacity);
    for (size_t i = 0; i < n; ++i) {
      const int64_t want = demands[i].value_or(equal);
      EXPECT_GE(shares[i], std::min(want, equal)) << "round " << round << " client " << i;
      if (want_sum >= capacity) {
        EXPECT_LE(shares[i], want) << "round " << round << " client " << i;
      }
    }
    // The same demands in reverse order: the same multiset of shares to the same demands,
    // up to the one-unit remainders among equal wants.
    std::vector<std::optional<int64_t>> reversed(demands.rbegin(), demands.rend());
    std::vector<int64_t> back = max_min_shares(capacity, reversed);
    std::reverse(back.begin(), back.end());
    for (size_t i = 0; i < n; ++i) EXPECT_LE(std::abs(back[i] - shares[i]), 1) << "round " << round;
  }
}

TEST(FairShareProperties, AssignmentsNeverExceedTheShare) {
  for (int64_t share = 0; share < 400'000; share += 37) {
    const Assignment a = token_bucket_for(share, nullptr);
    if (a.kind == Assignment::Kind::kDenyAll) {
      EXPECT_LT(share * kSlowFillS, kMrpsPerRps);
      continue;
    }
    EXPECT_GE(a.fill_interval_s, 1);
    EXPECT_GE(a.tokens_per_fill, 1);
    EXPECT_LE(a.tokens_per_fill * kMrpsPerRps, share * a.fill_interval_s);
    // Hysteresis: a kept previous bucket is never above the share either.
    for (const int64_t prev : {share - share / 30, share + 1000, share + share / 30}) {
      const Assignment p = token_bucket_for(prev, nullptr);
      const Assignment k = token_bucket_for(share, &p);
      if (k.kind != Assignment::Kind::kTokenBucket) continue;
      const int64_t rate = k.tokens_per_fill * kMrpsPerRps / k.fill_interval_s;
      EXPECT_LE(rate, share) << share << " after " << prev;
    }
  }
}

}  // namespace
}  // namespace ratelimit::fair_share
