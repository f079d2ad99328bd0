// quota_service_test.cc — rlqs::QuotaService on a ManualClock: a bucket's rule decides its
// answer (limit divided, allow, deny, unmatched), clients of one bucket share it whatever the
// order of their bucket_id pairs, bad reports are ignored and counted while the rest of the
// message is answered, idle buckets and buckets beyond max_buckets are forgotten, and the
// metrics show each bucket (labels escaped).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "quota_service.h"
#include "ratelimit/clock.h"
#include "test_rules.h"

namespace ratelimit::rlqs {
namespace {

using fair_share::Assignment;

std::shared_ptr<const QuotaRules> rules() {
  auto r = std::make_shared<QuotaRules>();
  r->rules.push_back(limit_rule("api", 300));
  QuotaRule blocked;
  blocked.match = {{"name", "blocked"}};
  blocked.action.kind = QuotaAction::Kind::kDeny;
  r->rules.push_back(blocked);
  return r;  // unmatched: allow
}

BucketReport report(BucketKey id, uint64_t allowed = 0, uint64_t denied = 0, int64_t elapsed_us = 0) {
  return {std::move(id), allowed, denied, elapsed_us};
}

TEST(QuotaService, RulesDecideAndClientsShareABucket) {
  ManualClock clock;
  QuotaService q(rules(), {100, &clock});
  std::vector<BucketAnswer> out;
  const uint64_t a = q.new_client(), b = q.new_client();
  EXPECT_NE(a, b);
  const std::vector<BucketReport> first = {report({{"name", "api"}, {"z", "1"}}), report({{"name", "blocked"}}),
                                           report({{"name", "other"}})};
  q.report(a, "envoy", first, out);
  ASSERT_EQ(out.size(), 3U);
  EXPECT_EQ(out[0].assignment.kind, Assignment::Kind::kTokenBucket);
  EXPECT_EQ(out[0].assignment.tokens_per_fill, 300);
  EXPECT_EQ(out[1].assignment.kind, Assignment::Kind::kDenyAll);
  EXPECT_EQ(out[2].assignment.kind, Assignment::Kind::kAllowAll);
  EXPECT_EQ(out[2].assignment.ttl_s, 2);
  // The same bucket from b (pairs sorted by the caller, as rlqs_stream.cc does): two clients.
  q.report(b, "envoy", std::vector<BucketReport>{report({{"name", "api"}, {"z", "1"}})}, out);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].assignment.tokens_per_fill, 150);
  // a reports 1000 rps (held at 300): it wants 1000, b unknown wants 150: 150 / 150.
  clock.advance(Micros{1'000'000});
  q.report(a, "envoy", std::vector<BucketReport>{report({{"name", "api"}, {"z", "1"}}, 300, 700, 1'000'000)}, out);
  EXPECT_EQ(out[0].assignment.tokens_per_fill, 150);
  EXPECT_EQ(q.stats().buckets, 1U) << "allow/deny buckets are not tracked";
  EXPECT_EQ(q.stats().reports, 5U);
}

TEST(QuotaService, BadReportsAreIgnoredAndTheRestAnswered) {
  ManualClock clock;
  QuotaService q(rules(), {100, &clock});
  std::vector<BucketAnswer> out;
  const std::vector<BucketReport> msg = {
      report({}),                                                // no pair
      report({{"name", ""}}),                                    // empty value
      report({{"name", std::string(1100, 'x')}}),                // over 1024 bytes
      report({{"name", "api"}}, UINT64_MAX, 0, 1'000'000),        // absurd count
      report({{"name", "api"}}, 1, 0, -1),                       // negative time
      report({{"name", "api"}}, 5, 0, 1'000'000),                // good
  };
  q.report(q.new_client(), "envoy", msg, out);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].index, 5U);
  EXPECT_EQ(q.stats().ignored, 5U);
  BucketKey many;
  for (int i = 0; i < 33; ++i) many.emplace_back("k" + std::to_string(100 + i), "v");
  EXPECT_FALSE(QuotaService::valid_bucket(many));
  many.pop_back();
  EXPECT_TRUE(QuotaService::valid_bucket(many));
}

TEST(QuotaService, IdleAndExcessBucketsAreForgotten) {
  ManualClock clock;
  QuotaService q(rules(), {3, &clock});
  std::vector<BucketAnswer> out;
  const uint64_t c = q.new_client();
  for (int i = 0; i < 5; ++i) {
    q.report(c, "envoy", std::vector<BucketReport>{report({{"name", "api"}, {"user", std::to_string(i)}})}, out);
  }
  EXPECT_EQ(q.stats().buckets, 3U);
  EXPECT_EQ(q.stats().forgotten, 2U);
  // The three kept are the most recent (users 4, 3, 2).
  const auto kept = q.buckets(10);
  ASSERT_EQ(kept.size(), 3U);
  EXPECT_EQ(kept[0].id[1].second, "4");
  EXPECT_EQ(kept[2].id[1].second, "2");
  EXPECT_EQ(kept[0].clients, 1U);
  EXPECT_EQ(kept[0].capacity_mrps, 300'000);
  // Every assignment's TTL (2 s) passed: forgotten at the next report.
  clock.advance(Micros{2'000'000});
  q.report(c, "envoy", std::vector<BucketReport>{report({{"name", "api"}, {"user", "new"}})}, out);
  EXPECT_EQ(q.stats().buckets, 1U);
  EXPECT_EQ(q.stats().forgotten, 5U);
}

TEST(QuotaService, MetricsShowEachBucket) {
  ManualClock clock;
  QuotaService q(rules(), {100, &clock});
  std::vector<BucketAnswer> out;
  const uint64_t a = q.new_client(), b = q.new_client();
  const BucketKey id = {{"name", "api"}, {"user", "q\"x"}};
  q.report(a, "envoy", std::vector<BucketReport>{report(id)}, out);
  clock.advance(Micros{1'000'000});
  q.report(a, "envoy", std::vector<BucketReport>{report(id, 300, 700, 1'000'000)}, out);  // 1000 rps: 300
  q.report(b, "envoy", std::vector<BucketReport>{report(id, 0, 25, 2'000'000)}, out);     // 12.5 rps
  std::string page;
  q.render_metrics(page);
  const std::string labels = "{domain=\"envoy\",bucket=\"name=api,user=q\\\"x\"}";
  EXPECT_NE(page.find("ratelimitd_rlqs_bucket_clients" + labels + " 2\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ratelimitd_rlqs_bucket_demand_rps" + labels + " 1012.500\n"), std::string::npos) << page;
  // a still holds 300 (its assignment before b came), b got its demand: 12.5 -> 12 tokens.
  EXPECT_NE(page.find("ratelimitd_rlqs_bucket_assigned_rps" + labels + " 312.000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ratelimitd_rlqs_bucket_limit_rps" + labels + " 300.000\n"), std::string::npos) << page;
  EXPECT_NE(page.find("ratelimitd_rlqs_buckets 1\n"), std::string::npos) << page;
}

TEST(QuotaService, ReloadedRulesApplyAtTheNextReport) {
  ManualClock clock;
  QuotaService q(rules(), {100, &clock});
  std::vector<BucketAnswer> out;
  const uint64_t c = q.new_client();
  q.report(c, "envoy", std::vector<BucketReport>{report({{"name", "api"}})}, out);
  EXPECT_EQ(out[0].assignment.tokens_per_fill, 300);
  auto next = std::make_shared<QuotaRules>(*rules());
  next->rules[0].action.capacity_mrps = 60'000;
  q.set_rules(next);
  q.report(c, "envoy", std::vector<BucketReport>{report({{"name", "api"}}, 10, 0, 1'000'000)}, out);
  EXPECT_EQ(out[0].assignment.tokens_per_fill, 60);
  // The configured reporting interval: first assignments (and blanket answers) live longer.
  auto slow = std::make_shared<QuotaRules>(*next);
  slow->reporting_interval_s = 10;
  q.set_rules(slow);
  const std::vector<BucketReport> first = {report({{"name", "api"}, {"user", "x"}}), report({{"name", "other"}})};
  q.report(q.new_client(), "envoy", first, out);
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].assignment.ttl_s, 15);
  EXPECT_EQ(out[1].assignment.ttl_s, 15);
}

}  // namespace
}  // namespace ratelimit::rlqs
