// rls_service_test.cc — ShouldRateLimit (RateLimitService) in process on the memory store with a
// manual clock: statuses as envoyproxy/ratelimit answers them, shadow modes, quota mode,
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, the limit headers, refused requests, the per-rule
// statistics and their cap; and the protojson form of /json (rls_json).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "temp_dir.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "rls_json.h"
#include "rls_service.h"

namespace ratelimit::rls {
namespace {
namespace fs = std::filesystem;

using test_support::TempDir;

class InlineCall final : public Call {
 public:
  void done() override { ADD_FAILURE() << "the memory store answers inline"; }
};

constexpr int64_t kT0 = 1'699'999'990'500'000;  // 10.5 s into a minute

const char* kConfig = R"(domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3, name: per_user }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: quota
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: free
    rate_limit: { unlimited: true }
  - key: one
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: five
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: ip
    detailed_metric: true
    rate_limit: { unit: hour, requests_per_unit: 100 }
)";

struct Fixture {
  explicit Fixture(ServiceOptions options = {}, size_t max_request_keys = 1000,
                   std::string config_text = kConfig)
      : config(std::move(config_text)),
        clock(Micros{kT0}),
        store(std::make_shared<MemoryStore>(MemoryStoreOptions{.max_keys = 10'000, .clock = &clock})),
        decisions(store, nullptr),
        source((write(), dir.path().string()), false, LoadOptions{}),
        stats(max_request_keys) {
    EXPECT_TRUE(source.reload().status.is_ok());
    service = std::make_unique<RateLimitService>(decisions, source, std::move(options), stats, &outcomes);
  }
  void write() { std::ofstream(dir.path() / "config.yaml") << config; }

  // One request of single-entry descriptors; returns the call (answered inline).
  InlineCall& ask(std::vector<std::pair<std::string, std::string>> descriptors,
                  std::optional<uint64_t> hits = std::nullopt) {
    call.request.clear();
    call.request.domain = "edge";
    for (auto& [k, v] : descriptors) {
      RequestDescriptor d;
      d.entries.push_back({k, v});
      d.hits_addend = hits;
      call.request.descriptors.push_back(std::move(d));
    }
    EXPECT_TRUE(service->should_rate_limit(call));
    return call;
  }

  std::string config;
  TempDir dir{"rls-svc-"};
  ManualClock clock;
  std::shared_ptr<MemoryStore> store;
  service::DecisionService decisions;
  RuleSource source;
  RuleStats stats;
  service::RuleCounters outcomes;
  std::unique_ptr<RateLimitService> service;
  InlineCall call;
};

// The all_or_nothing extension: when one descriptor is over its limit, the others are not
// counted (envoyproxy/ratelimit, and this domain without the extension, count them).
TEST(RateLimitService, AllOrNothingDomainCountsNothingWhenOneDescriptorDenies) {
  for (const bool all : {true, false}) {
    Fixture f({}, 1000, std::string(kConfig) + (all ? "all_or_nothing: true\n" : ""));
    ASSERT_EQ(f.ask({{"one", "x"}, {"five", "x"}}).response.overall_code, Code::kOk);
    for (int i = 0; i < 3; ++i) {
      const Call& c = f.ask({{"one", "x"}, {"five", "x"}});
      ASSERT_TRUE(c.status.is_ok()) << c.status.message();
      EXPECT_EQ(c.response.overall_code, Code::kOverLimit);
      EXPECT_EQ(c.response.statuses[0].code, Code::kOverLimit);
    }
    // `five` alone, its 2nd count when the denied requests counted nothing (3 left), else its
    // 5th (0 left: envoyproxy/ratelimit counts every descriptor of a denied request).
    const Call& c = f.ask({{"five", "x"}});
    EXPECT_EQ(c.response.statuses[0].limit_remaining, all ? 3u : 0u) << (all ? "all_or_nothing" : "independent");
  }
}

TEST(RateLimitService, CountsToTheLimitThenOverLimit) {
  Fixture f;
  for (uint32_t i = 0; i < 3; ++i) {
    const Call& c = f.ask({{"user", "alice"}});
    ASSERT_TRUE(c.status.is_ok()) << c.status.message();
    EXPECT_EQ(c.response.overall_code, Code::kOk);
    ASSERT_EQ(c.response.statuses.size(), 1u);
    const DescriptorStatus& s = c.response.statuses[0];
    EXPECT_EQ(s.code, Code::kOk);
    ASSERT_TRUE(s.current_limit);
    EXPECT_EQ(s.current_limit->requests_per_unit, 3u);
    EXPECT_EQ(s.current_limit->unit, Unit::kMinute);
    EXPECT_EQ(s.current_limit->name, "per_user");
    EXPECT_EQ(s.limit_remaining, 2 - i);
    EXPECT_EQ(s.duration_until_reset_seconds, 50);  // 60 - 10 (envoyproxy/ratelimit's value)
  }
  const Call& c = f.ask({{"user", "alice"}});
  EXPECT_EQ(c.response.overall_code, Code::kOverLimit);
  EXPECT_EQ(c.response.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(c.response.statuses[0].limit_remaining, 0u);
  // Another value of the key-only rule has its own counter.
  EXPECT_EQ(f.ask({{"user", "bob"}}).response.overall_code, Code::kOk);
  // The window ends: counting starts again.
  f.clock.advance(std::chrono::seconds(50));
  EXPECT_EQ(f.ask({{"user", "alice"}}).response.statuses[0].limit_remaining, 2u);
}

TEST(RateLimitService, NoMatchAndUnlimited) {
  Fixture f;
  const Call& c = f.ask({{"nothing", "x"}, {"free", "y"}});
  ASSERT_TRUE(c.status.is_ok());
  EXPECT_EQ(c.response.overall_code, Code::kOk);
  EXPECT_EQ(c.response.statuses[0].code, Code::kOk);
  EXPECT_FALSE(c.response.statuses[0].current_limit);
  EXPECT_EQ(c.response.statuses[0].limit_remaining, 0u);
  EXPECT_FALSE(c.response.statuses[0].duration_until_reset_seconds);
  EXPECT_EQ(c.response.statuses[1].code, Code::kOk);
  EXPECT_EQ(c.response.statuses[1].limit_remaining, 4294967295u);
  // An unknown domain is not an error: nothing applies.
  f.call.request.domain = "other";
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.response.overall_code, Code::kOk);
}

TEST(RateLimitService, RuleShadowModeAnswersOkAndCounts) {
  Fixture f;
  f.ask({{"shadow", "a"}});
  const Call& c = f.ask({{"shadow", "a"}});
  EXPECT_EQ(c.response.overall_code, Code::kOk);
  EXPECT_EQ(c.response.statuses[0].code, Code::kOk);
  EXPECT_EQ(c.response.statuses[0].limit_remaining, 0u);
  std::string m;
  f.stats.render(m);
  EXPECT_NE(m.find("ratelimit_service_rate_limit_shadow_mode_total{domain=\"edge\",key1=\"shadow\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_EQ(f.outcomes.outcomes[static_cast<size_t>(service::Outcome::kShadowDenied)].load(), 1u);
}

TEST(RateLimitService, GlobalShadowModeKeepsTheStatuses) {
  ServiceOptions o;
  o.shadow_mode = true;
  Fixture f(o);
  f.ask({{"one", "a"}});
  const Call& c = f.ask({{"one", "a"}});
  EXPECT_EQ(c.response.overall_code, Code::kOk);
  EXPECT_EQ(c.response.statuses[0].code, Code::kOverLimit);
}

TEST(RateLimitService, QuotaModeIsOverOnlyWhenEveryQuotaDescriptorIs) {
  Fixture f;
  f.ask({{"quota", "a"}});
  const Call& c = f.ask({{"quota", "a"}, {"five", "a"}});
  EXPECT_EQ(c.response.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(c.response.overall_code, Code::kOverLimit);  // the only quota descriptor is over
  f.ask({{"quota", "b"}});
  const Call& d = f.ask({{"quota", "b"}, {"quota", "c"}});
  EXPECT_EQ(d.response.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(d.response.statuses[1].code, Code::kOk);
  EXPECT_EQ(d.response.overall_code, Code::kOk);  // one of two quota descriptors is over
}

TEST(RateLimitService, DeniedHitsAreCountedByDefault) {
  Fixture f;
  f.ask({{"one", "a"}, {"five", "a"}});             // one: 1/1, five: 1/5
  const Call& c = f.ask({{"one", "a"}, {"five", "a"}});  // one over; five counts anyway: 2/5
  EXPECT_EQ(c.response.overall_code, Code::kOverLimit);
  EXPECT_EQ(c.response.statuses[1].limit_remaining, 3u);
}

TEST(RateLimitService, StopCacheKeyIncrementWhenOverLimit) {
  ServiceOptions o;
  o.stop_increment_when_over_limit = true;
  Fixture f(o);
  f.ask({{"one", "a"}, {"five", "a"}});  // none would pass: both count (one 1/1, five 1/5)
  const Call& c = f.ask({{"one", "a"}, {"five", "a"}});
  EXPECT_EQ(c.response.statuses[0].code, Code::kOverLimit);
  // five was only checked: still 1/5 used.
  EXPECT_EQ(c.response.statuses[1].code, Code::kOk);
  EXPECT_EQ(c.response.statuses[1].limit_remaining, 4u);
  EXPECT_EQ(f.ask({{"five", "a"}}).response.statuses[0].limit_remaining, 3u);
}

TEST(RateLimitService, HitsAddend) {
  Fixture f;
  EXPECT_EQ(f.ask({{"five", "h"}}, 4).response.statuses[0].limit_remaining, 1u);
  // 0 = check only.
  EXPECT_EQ(f.ask({{"five", "h"}}, 0).response.statuses[0].limit_remaining, 1u);
  EXPECT_EQ(f.ask({{"five", "h"}}, 2).response.overall_code, Code::kOverLimit);
  // A check of a key with nothing counted in its window: the full limit, and nothing to reset
  // (the core's reset_after; envoyproxy/ratelimit says 50 here, the window's end — README).
  const DescriptorStatus fresh = f.ask({{"five", "fresh"}}, 0).response.statuses[0];
  EXPECT_EQ(fresh.code, Code::kOk);
  EXPECT_EQ(fresh.limit_remaining, 5u);
  EXPECT_EQ(fresh.duration_until_reset_seconds, 0);
  // The request-level hits_addend applies where a descriptor has none.
  f.call.request.descriptors[0].hits_addend.reset();
  f.call.request.descriptors[0].entries[0].value = "g";
  f.call.request.hits_addend = 5;
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.response.overall_code, Code::kOk);
  EXPECT_EQ(f.call.response.statuses[0].limit_remaining, 0u);
}

// Usage known after the response (docs/usage.md, docs/envoy.md): Envoy's rate-limit filter with
// apply_on_stream_done sends the response's usage as hits_addend. envoyproxy/ratelimit counts it
// even past the limit, so the requests after it are over the limit until the window ends. With
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, a report that takes one descriptor over counts there
// and nowhere else (the others of the request are only checked); off, every descriptor counts.
TEST(RateLimitService, UsageReportedAsHitsCountsPastTheLimitBothWays) {
  {
    Fixture f;
    EXPECT_EQ(f.ask({{"five", "u"}}, 4).response.statuses[0].limit_remaining, 1u);  // 4/5
    const Call& after = f.ask({{"five", "u"}}, 3);  // the response used 3: 7/5, counted
    EXPECT_EQ(after.response.overall_code, Code::kOverLimit);
    EXPECT_EQ(f.ask({{"five", "u"}}, 0).response.overall_code, Code::kOverLimit);  // 7 > 5
    EXPECT_EQ(f.ask({{"five", "u"}}, 1).response.overall_code, Code::kOverLimit);
    // Off: a report over one descriptor's limit counts in every descriptor of the request.
    f.ask({{"five", "v"}, {"one", "v"}}, 1);                                 // five 1/5, one 1/1
    EXPECT_EQ(f.ask({{"five", "v"}, {"one", "v"}}, 3).response.overall_code, Code::kOverLimit);
    EXPECT_EQ(f.ask({{"five", "v"}}, 0).response.statuses[0].limit_remaining, 1u);  // 4/5
  }
  {
    ServiceOptions o;
    o.stop_increment_when_over_limit = true;
    Fixture f(o);
    f.ask({{"five", "v"}, {"one", "v"}}, 1);                                 // five 1/5, one 1/1
    EXPECT_EQ(f.ask({{"five", "v"}, {"one", "v"}}, 3).response.overall_code, Code::kOverLimit);
    EXPECT_EQ(f.ask({{"five", "v"}}, 0).response.statuses[0].limit_remaining, 4u);  // still 1/5
    EXPECT_EQ(f.ask({{"one", "v"}}, 0).response.overall_code, Code::kOverLimit);    // 4/1
  }
}

TEST(RateLimitService, LimitHeadersOfTheClosestDescriptor) {
  ServiceOptions o;
  o.response_headers = true;
  o.limit_header = "X-Limit";
  Fixture f(o);
  const Call& c = f.ask({{"five", "a"}, {"user", "a"}, {"nothing", "a"}});
  ASSERT_EQ(c.response.response_headers_to_add.size(), 3u);
  EXPECT_EQ(c.response.response_headers_to_add[0].key, "X-Limit");
  EXPECT_EQ(c.response.response_headers_to_add[0].value, "3");  // user: 2 left of 3
  EXPECT_EQ(c.response.response_headers_to_add[1].key, "RateLimit-Remaining");
  EXPECT_EQ(c.response.response_headers_to_add[1].value, "2");
  EXPECT_EQ(c.response.response_headers_to_add[2].key, "RateLimit-Reset");
  EXPECT_EQ(c.response.response_headers_to_add[2].value, "50");
  // No limit applied: no headers.
  EXPECT_TRUE(f.ask({{"nothing", "a"}}).response.response_headers_to_add.empty());
}

TEST(RateLimitService, LimitOverride) {
  Fixture f;
  f.call.request.clear();
  f.call.request.domain = "edge";
  RequestDescriptor d;
  d.entries.push_back({"anything", "x"});
  d.limit = LimitOverride{2, 1};  // 2 per second
  f.call.request.descriptors.push_back(d);
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.response.statuses[0].current_limit->unit, Unit::kSecond);
  EXPECT_EQ(f.call.response.statuses[0].limit_remaining, 1u);
  f.call.request.descriptors[0].limit = LimitOverride{2, 0};
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.status.code(), StatusCode::kInvalidArgument);
}

// Issue 23 item 6: envoyproxy/ratelimit keeps one counter per (domain, entries as sent,
// window): a request's limit override counts together with the configured limit of the same
// entries, and a reload that changes requests_per_unit keeps the window's count.
TEST(RateLimitService, AnOverrideCountsOnTheConfiguredLimitsCounter) {
  Fixture f;
  auto ask = [&](std::optional<uint32_t> override_rpu) -> const DescriptorStatus& {
    f.call.request.clear();
    f.call.request.domain = "edge";
    RequestDescriptor d;
    d.entries.push_back({"user", "carol"});
    if (override_rpu) d.limit = LimitOverride{*override_rpu, 2};  // per minute, as configured
    f.call.request.descriptors.push_back(d);
    EXPECT_TRUE(f.service->should_rate_limit(f.call));
    return f.call.response.statuses[0];
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ask(std::nullopt).code, Code::kOk) << i;  // 3 of 3
  EXPECT_EQ(ask(std::nullopt).code, Code::kOverLimit);                          // 4th hit
  // The override of 10 sees the 4 hits already counted: 6 more, not 10.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ask(10).code, Code::kOk) << i;
  EXPECT_EQ(ask(10).code, Code::kOverLimit);
  EXPECT_EQ(ask(10).limit_remaining, 0u);
}

TEST(RateLimitService, AReloadChangingTheLimitKeepsTheWindowsCount) {
  Fixture f;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(f.ask({{"user", "dave"}}).response.overall_code, Code::kOk);
  std::ofstream(f.dir.path() / "config.yaml") << "domain: edge\ndescriptors:\n  - key: user\n"
                                                  "    rate_limit: { unit: minute, requests_per_unit: 5 }\n";
  ASSERT_TRUE(f.source.reload().status.is_ok());
  f.service->refresh();
  EXPECT_EQ(f.ask({{"user", "dave"}}).response.statuses[0].limit_remaining, 1u);  // 4 of 5
  EXPECT_EQ(f.ask({{"user", "dave"}}).response.overall_code, Code::kOk);          // 5 of 5
  EXPECT_EQ(f.ask({{"user", "dave"}}).response.overall_code, Code::kOverLimit);
  // A different unit is a different window, so a different counter (as there).
  std::ofstream(f.dir.path() / "config.yaml") << "domain: edge\ndescriptors:\n  - key: user\n"
                                                  "    rate_limit: { unit: hour, requests_per_unit: 5 }\n";
  ASSERT_TRUE(f.source.reload().status.is_ok());
  f.service->refresh();
  EXPECT_EQ(f.ask({{"user", "dave"}}).response.statuses[0].limit_remaining, 4u);
}

TEST(RateLimitService, RefusedRequests) {
  Fixture f;
  f.call.request.clear();
  f.call.request.domain = "edge";
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.status.message(), "rate limit descriptor list must not be empty");
  f.call.request.domain.clear();
  f.call.request.descriptors.resize(1);
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.status.message(), "rate limit domain must not be empty");
  f.call.request.domain = "edge";
  f.call.request.descriptors.resize(kMaxDescriptors + 1);
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.status.code(), StatusCode::kInvalidArgument);
  const Call& c = f.ask({{"five", "a"}}, uint64_t{kMaxCost} + 1);
  EXPECT_EQ(c.status.code(), StatusCode::kInvalidArgument);
}

// The proto's shape rules, checked by the service so that gRPC and /json refuse alike: the
// first descriptor ("five") would be counted if any of these got through.
TEST(RateLimitService, RefusesMalformedDescriptorsAndCountsNothing) {
  Fixture f;
  EXPECT_EQ(f.ask({{"five", "a"}, {"", "x"}}).status.message(),
            "descriptor 1 entry 0: the key must not be empty");
  EXPECT_EQ(f.ask({{"five", "a"}, {"user", ""}}).status.message(),
            "descriptor 1 entry 0 (key 'user'): the value must not be empty");
  f.ask({{"five", "a"}, {"user", "u"}});
  ASSERT_TRUE(f.call.status.is_ok());  // counts five once: the baseline below
  f.call.request.descriptors[1].entries.clear();
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.call.status.message(), "descriptor 1 has no entries");
  f.call.request.descriptors[1].entries.assign(kMaxEntries + 1, RequestEntry{"k", "v"});
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  EXPECT_EQ(f.call.status.message(), "descriptor 1 has 65 entries (at most 64)");
  f.call.request.descriptors[1].entries.resize(kMaxEntries);  // at the bound: decided
  ASSERT_TRUE(f.service->should_rate_limit(f.call));
  ASSERT_TRUE(f.call.status.is_ok()) << f.call.status.message();
  EXPECT_EQ(f.call.response.statuses[0].limit_remaining, 3u);  // 5 - the two accepted calls
}

TEST(RateLimitService, StatisticsPerRuleAndTheirSplit) {
  ServiceOptions o;
  o.near_limit_ratio = 0.8F;  // five: near threshold floor(4.0) = 4
  Fixture f(o);
  for (int i = 0; i < 7; ++i) f.ask({{"five", "s"}});
  std::string m;
  f.stats.render(m);
  const std::string labels = "{domain=\"edge\",key1=\"five\"} ";
  EXPECT_NE(m.find("ratelimit_service_rate_limit_total_hits_total" + labels + "7\n"), std::string::npos) << m;
  EXPECT_NE(m.find("ratelimit_service_rate_limit_within_limit_total" + labels + "5\n"), std::string::npos);
  EXPECT_NE(m.find("ratelimit_service_rate_limit_near_limit_total" + labels + "1\n"), std::string::npos);
  EXPECT_NE(m.find("ratelimit_service_rate_limit_over_limit_total" + labels + "2\n"), std::string::npos);
}

TEST(RateLimitService, DetailedMetricKeysAreCapped) {
  Fixture f({}, 2);
  for (const char* ip : {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.1"}) f.ask({{"ip", ip}});
  std::string m;
  f.stats.render(m);
  // envoyproxy/ratelimit's sanitised keys: the dots of an address become '_'.
  EXPECT_NE(m.find("ratelimit_service_rate_limit_total_hits_total{domain=\"edge\",key1=\"ip_10_0_0_1\"} 2\n"),
            std::string::npos) << m;
  EXPECT_NE(m.find("key1=\"ip_10_0_0_2\"} 1\n"), std::string::npos);
  EXPECT_EQ(m.find("ip_10_0_0_3"), std::string::npos);
  // Past the cap the hits go to the rule's own key, and are counted as overflow.
  EXPECT_NE(m.find("ratelimit_service_rate_limit_total_hits_total{domain=\"edge\",key1=\"ip\"} 2\n"),
            std::string::npos);
  EXPECT_NE(m.find("ratelimitd_rls_stats_overflow_hits_total 2\n"), std::string::npos);
  EXPECT_NE(m.find("ratelimitd_rls_stats_request_keys 2\n"), std::string::npos);
  EXPECT_EQ(f.stats.request_keys(), 2u);
}

TEST(RateLimitService, ReloadIsPublishedByRefresh) {
  Fixture f;
  EXPECT_EQ(f.service->generation(), 1u);
  std::ofstream(f.dir.path() / "config.yaml") << "domain: edge\ndescriptors:\n  - key: user\n"
                                                  "    rate_limit: { unit: minute, requests_per_unit: 1 }\n";
  ASSERT_TRUE(f.source.reload().status.is_ok());
  f.service->refresh();
  EXPECT_EQ(f.service->generation(), 2u);
  EXPECT_NE(f.service->dump().find("edge.user: unit=MINUTE requests_per_unit=1"), std::string::npos);
  EXPECT_EQ(f.ask({{"user", "z"}}).response.statuses[0].current_limit->requests_per_unit, 1u);
}

// ---------------------------------------------------------------------------------------
// A networked store: should_rate_limit() returns false and done() comes once, from a store
// thread, also when STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT runs two phases.

class WaitingCall final : public Call {
 public:
  void done() override {
    std::lock_guard lock(mu_);
    ++done_;
    thread_ = std::this_thread::get_id();
    cv_.notify_all();
  }
  // `inline_answer`: should_rate_limit()'s result. True once the answer is there (bounded).
  bool wait(bool inline_answer) {
    if (inline_answer) return true;
    std::unique_lock lock(mu_);
    ++expected_;
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return done_ >= expected_; });
  }
  int dones() {
    std::lock_guard lock(mu_);
    return done_;
  }
  std::thread::id thread() {
    std::lock_guard lock(mu_);
    return thread_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int done_ = 0, expected_ = 0;
  std::thread::id thread_;
};

TEST(RateLimitService, RedisAnswersFromAStoreThreadInBothPhases) {
  auto url = ratelimit::testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  RedisStoreOptions ro;
  ro.url = *url;
  ro.connections = 2;
  ro.command_timeout = std::chrono::milliseconds(2000);
  ro.key_prefix = "rltest:rls:" + std::to_string(std::random_device{}()) + ":";
  auto store = RedisStore::connect(ro);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  service::DecisionService decisions(*store, nullptr);
  TempDir dir{"rls-svc-"};
  std::ofstream(dir.path() / "config.yaml") << kConfig;
  RuleSource source(dir.path().string(), false, LoadOptions{});
  ASSERT_TRUE(source.reload().status.is_ok());
  RuleStats stats;
  service::RuleCounters outcomes;
  ServiceOptions o;
  o.stop_increment_when_over_limit = true;
  RateLimitService svc(decisions, source, o, stats, &outcomes);

  WaitingCall call;
  auto ask = [&] {
    call.request.clear();
    call.request.domain = "edge";
    for (const char* k : {"one", "five"}) {
      RequestDescriptor d;
      d.entries.push_back({k, "r"});
      call.request.descriptors.push_back(std::move(d));
    }
    const bool inline_answer = svc.should_rate_limit(call);
    EXPECT_TRUE(call.wait(inline_answer));
    EXPECT_TRUE(call.status.is_ok()) << call.status.message();
    return inline_answer;
  };
  const bool first_inline = ask();
  EXPECT_EQ(call.response.overall_code, Code::kOk);
  ask();
  EXPECT_EQ(call.response.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(call.response.statuses[1].limit_remaining, 4u);  // five only checked: 1 of 5 used
  if (!first_inline) {
    EXPECT_GE(call.dones(), 1);
    EXPECT_NE(call.thread(), std::this_thread::get_id());
  }
}

// ---------------------------------------------------------------------------------------
// JSON

TEST(RlsJson, ParsesBothFieldSpellings) {
  RateLimitRequest r;
  ASSERT_TRUE(parse_rate_limit_request_json(
                  R"({"domain":"d","hits_addend":2,"descriptors":[{"entries":[{"key":"k","value":"v"}],)"
                  R"("limit":{"requests_per_unit":"7","unit":"HOUR"},"hitsAddend":"0"}]})",
                  r)
                  .is_ok());
  EXPECT_EQ(r.domain, "d");
  EXPECT_EQ(r.hits_addend, 2u);
  ASSERT_EQ(r.descriptors.size(), 1u);
  EXPECT_EQ(r.descriptors[0].entries[0].key, "k");
  EXPECT_EQ(r.descriptors[0].entries[0].value, "v");
  ASSERT_TRUE(r.descriptors[0].limit);
  EXPECT_EQ(r.descriptors[0].limit->requests_per_unit, 7u);
  EXPECT_EQ(r.descriptors[0].limit->unit, 3);
  EXPECT_EQ(r.descriptors[0].hits_addend, 0u);
  ASSERT_TRUE(parse_rate_limit_request_json(R"({"domain":"d","descriptors":[{"hitsAddend":null,"limit":{"unit":2}}]})", r).is_ok());
  EXPECT_FALSE(r.descriptors[0].hits_addend);
  EXPECT_EQ(r.descriptors[0].limit->unit, 2);
}

TEST(RlsJson, RefusesWithThePath) {
  RateLimitRequest r;
  auto msg = [&](std::string_view body) { return parse_rate_limit_request_json(body, r).message(); };
  EXPECT_EQ(msg(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","vlaue":"v"}]}]})"),
            "descriptors[0].entries[0]: unknown field \"vlaue\"");
  EXPECT_EQ(msg(R"({"domian":"d"})"), "unknown field \"domian\"");
  EXPECT_EQ(msg(R"({"domain":5})"), "domain: must be a string, got a number");
  EXPECT_EQ(msg(R"({"hitsAddend":-1})"), "hitsAddend: must not be negative");
  EXPECT_EQ(msg(R"({"hitsAddend":4294967296})"), "hitsAddend: is above 4294967295");
  EXPECT_EQ(msg(R"({"descriptors":[{"limit":{"unit":"minute"}}]})").substr(0, 52),
            "descriptors[0].limit.unit: invalid value for enum ty");
  EXPECT_EQ(msg(R"([1])"), "the body must be a JSON object, got an array");
  EXPECT_EQ(msg(""), "the request body is empty; expected a JSON RateLimitRequest");
  EXPECT_NE(msg(R"({"domain":)").find("not valid JSON"), std::string::npos);
}

TEST(RlsJson, RendersAsProtojson) {
  RateLimitResponse r;
  r.overall_code = Code::kOverLimit;
  DescriptorStatus a;
  a.code = Code::kOverLimit;
  a.current_limit = CurrentLimit{1, Unit::kMinute, ""};
  a.duration_until_reset_seconds = 42;
  DescriptorStatus b;
  b.code = Code::kOk;
  b.limit_remaining = 4294967295u;
  r.statuses = {a, b};
  r.response_headers_to_add = {{"RateLimit-Limit", "1"}};
  std::string out;
  append_rate_limit_response_json(r, out);
  EXPECT_EQ(out,
            R"({"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":)"
            R"({"requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":"42s"},)"
            R"({"code":"OK","limitRemaining":4294967295}],)"
            R"("responseHeadersToAdd":[{"key":"RateLimit-Limit","value":"1"}]})");
}

}  // namespace
}  // namespace ratelimit::rls
