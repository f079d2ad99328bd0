// rule_set_test.cc — src/rls/rule_set: envoyproxy/ratelimit's matching rules, one test per
// rule, and every configuration it refuses, with the message and line.
#include "rule_set.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "../yaml/alias_bomb.h"

namespace ratelimit::rls {
namespace {

std::shared_ptr<const RuleSet> load_ok(std::initializer_list<std::string> texts,
                                       LoadOptions options = {}) {
  std::vector<SourceFile> files;
  int i = 0;
  for (const auto& t : texts) files.push_back({"f" + std::to_string(++i) + ".yaml", t});
  auto r = RuleSet::load(files, options);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : nullptr;
}

std::string load_error(std::initializer_list<std::string> texts, LoadOptions options = {}) {
  std::vector<SourceFile> files;
  int i = 0;
  for (const auto& t : texts) files.push_back({"f" + std::to_string(++i) + ".yaml", t});
  auto r = RuleSet::load(files, options);
  EXPECT_FALSE(r.ok()) << "loaded: " << texts.begin()->c_str();
  return r.ok() ? "" : r.status().message();
}

// One descriptor from "k=v,k2=v2".
struct Req {
  std::vector<std::vector<std::pair<std::string, std::string>>> descriptors;
  std::vector<std::optional<LimitOverride>> limits;
};

std::vector<Applied> resolve(const RuleSet& set, std::string_view domain,
                             const std::vector<std::vector<std::pair<std::string, std::string>>>& ds,
                             std::vector<std::optional<LimitOverride>> limits = {}) {
  std::vector<std::vector<Entry>> entries(ds.size());
  std::vector<Descriptor> descs(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) {
    for (const auto& [k, v] : ds[i]) entries[i].push_back({k, v});
    descs[i].entries = entries[i];
    if (i < limits.size()) descs[i].limit = limits[i];
  }
  std::vector<Applied> out;
  Status s = set.resolve(domain, descs, out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

const Rule* one(const RuleSet& set, std::string_view domain,
                std::vector<std::pair<std::string, std::string>> d) {
  auto out = resolve(set, domain, {d});
  return out.at(0).rule();
}

constexpr const char* kBasic = R"(
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: user*
    rate_limit:
      unit: Minute
      requests_per_unit: 50
  - key: database
    rate_limit:
      unit: HOUR
      requests_per_unit: 5
)";

TEST(RuleSetMatch, ExactValueThenWildcardThenKeyOnlyDefault) {
  auto set = load_ok({kBasic});
  ASSERT_TRUE(set);
  const Rule* exact = one(*set, "mongo_cps", {{"database", "users"}});
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->requests_per_unit, 500u);
  EXPECT_EQ(exact->unit, Unit::kSecond);
  EXPECT_EQ(exact->full_key, "mongo_cps.database_users");
  const Rule* wild = one(*set, "mongo_cps", {{"database", "userdata"}});
  ASSERT_TRUE(wild);
  EXPECT_EQ(wild->requests_per_unit, 50u);
  EXPECT_EQ(wild->full_key, "mongo_cps.database_user*");
  const Rule* def = one(*set, "mongo_cps", {{"database", "orders"}});
  ASSERT_TRUE(def);
  EXPECT_EQ(def->requests_per_unit, 5u);
  EXPECT_EQ(def->unit, Unit::kHour);
  EXPECT_EQ(def->full_key, "mongo_cps.database");
  // An empty value is "database_" — no exact or wildcard match, so the default.
  EXPECT_EQ(one(*set, "mongo_cps", {{"database", ""}}), def);
  EXPECT_EQ(one(*set, "mongo_cps", {{"other", "users"}}), nullptr);
  EXPECT_EQ(one(*set, "unknown_domain", {{"database", "users"}}), nullptr);
}

TEST(RuleSetMatch, WildcardsAnywhereFirstInFileOrderWins) {
  auto set = load_ok({R"(
domain: d
descriptors:
  - key: path
    value: "/api/*/users/*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: "*.png"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: "/api/*"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: "a**b"
    rate_limit: {unit: second, requests_per_unit: 4}
)"});
  ASSERT_TRUE(set);
  auto rpu = [&](std::string v) {
    const Rule* r = one(*set, "d", {{"path", v}});
    return r ? static_cast<int>(r->requests_per_unit) : 0;
  };
  EXPECT_EQ(rpu("/api/v1/users/42"), 1);
  EXPECT_EQ(rpu("/api/v1/users/"), 1);    // '*' matches an empty run
  EXPECT_EQ(rpu("/api/v1/orders"), 3);
  EXPECT_EQ(rpu("/api/logo.png"), 2);     // before "/api/*" in file order
  EXPECT_EQ(rpu("/img/logo.png"), 2);
  EXPECT_EQ(rpu("/other"), 0);
  EXPECT_EQ(rpu("ab"), 4);
  EXPECT_EQ(rpu("axxb"), 4);
  EXPECT_EQ(rpu("ba"), 0);
}

TEST(RuleSetMatch, WildcardMatchSemantics) {
  EXPECT_TRUE(wildcard_match("abc", "abc"));
  EXPECT_FALSE(wildcard_match("abc", "abcd"));
  EXPECT_TRUE(wildcard_match("a*", "a"));
  EXPECT_TRUE(wildcard_match("*", ""));
  EXPECT_TRUE(wildcard_match("a*c*e", "abcde"));
  EXPECT_FALSE(wildcard_match("a*c*e", "aec"));
  EXPECT_FALSE(wildcard_match("ab*ba", "aba"));  // prefix and suffix may not overlap
  EXPECT_TRUE(wildcard_match("ab*ba", "abba"));
  EXPECT_TRUE(wildcard_match("x*y*y", "xyy"));
  // Matched against the joined "key_value", as envoyproxy/ratelimit does.
  EXPECT_TRUE(wildcard_match("k_v*", "k_value"));
}

constexpr const char* kNested = R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: day, requests_per_unit: 100}
)";

TEST(RuleSetMatch, ExactDepthLimitAppliesAtTheLastEntryOnly) {
  auto set = load_ok({kNested});
  ASSERT_TRUE(set);
  const Rule* ip = one(*set, "edge", {{"remote_address", "10.0.0.1"}});
  ASSERT_TRUE(ip);
  EXPECT_EQ(ip->requests_per_unit, 10u);
  const Rule* login = one(*set, "edge", {{"remote_address", "10.0.0.1"}, {"path", "/login"}});
  ASSERT_TRUE(login);
  EXPECT_EQ(login->requests_per_unit, 2u);
  EXPECT_EQ(login->full_key, "edge.remote_address.path_/login");
  // The parent's limit does not apply to a deeper request that misses the child.
  EXPECT_EQ(one(*set, "edge", {{"remote_address", "10.0.0.1"}, {"path", "/x"}}), nullptr);
  // A request deeper than the configuration: nothing.
  EXPECT_EQ(one(*set, "edge", {{"remote_address", "a"}, {"path", "/login"}, {"x", "y"}}),
            nullptr);
  // A request shallower than the rule: the parent level has no rate_limit.
  EXPECT_EQ(one(*set, "edge", {{"tenant", "t1"}}), nullptr);
  EXPECT_TRUE(one(*set, "edge", {{"tenant", "t1"}, {"plan", "free"}}));
  EXPECT_EQ(one(*set, "edge", {{"tenant", "t1"}, {"plan", "paid"}}), nullptr);
  // Entry order matters.
  EXPECT_EQ(one(*set, "edge", {{"plan", "free"}, {"tenant", "t1"}}), nullptr);
}

TEST(RuleSetMatch, RequestLimitOverrideWinsWhenTheDomainExists) {
  auto set = load_ok({kNested});
  ASSERT_TRUE(set);
  LimitOverride o{7, 2};  // 7 per MINUTE
  auto out = resolve(*set, "edge", {{{"anything", "x"}, {"k2", ""}}}, {o});
  const Rule* r = out[0].rule();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->requests_per_unit, 7u);
  EXPECT_EQ(r->unit, Unit::kMinute);
  EXPECT_FALSE(r->shadow_mode);
  EXPECT_EQ(r->full_key, "edge.anything_x.k2");
  EXPECT_EQ(out[0].stats_key, "edge.anything_x.k2");
  ASSERT_TRUE(r->policy);
  EXPECT_TRUE(r->policy->counts_every_hit());
  EXPECT_EQ(r->policy->limit(), 7);
  EXPECT_EQ(r->policy->window(), Micros{60'000'000});
  // A matching configured rule is overridden too.
  out = resolve(*set, "edge", {{{"remote_address", "1"}}}, {LimitOverride{0, 7}});
  ASSERT_TRUE(out[0].rule());
  EXPECT_EQ(out[0].rule()->requests_per_unit, 0u);
  EXPECT_EQ(out[0].rule()->unit, Unit::kWeek);
  // Unknown domain: nothing, override or not.
  out = resolve(*set, "nope", {{{"remote_address", "1"}}}, {o});
  EXPECT_EQ(out[0].rule(), nullptr);
  // An override with unit UNKNOWN (or outside the enum) is a bad request.
  std::vector<Entry> e{{"remote_address", "1"}};
  std::vector<Descriptor> d{{e, LimitOverride{5, 0}}};
  std::vector<Applied> applied;
  Status s = set->resolve("edge", d, applied);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unit 0"), std::string::npos) << s.message();
  d[0].limit = LimitOverride{5, 8};
  EXPECT_FALSE(set->resolve("edge", d, applied).is_ok());
}

TEST(RuleSetMatch, ReplacesDropsTheNamedRuleAcrossDescriptors) {
  auto set = load_ok({R"(
domain: d
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 10
  - key: vip
    rate_limit:
      name: vip
      unit: minute
      requests_per_unit: 1000
      replaces:
        - name: per_user
  - key: free
    rate_limit:
      unlimited: true
      replaces:
        - name: vip
)"});
  ASSERT_TRUE(set);
  auto out = resolve(*set, "d", {{{"user", "u1"}}, {{"vip", "yes"}}});
  EXPECT_EQ(out[0].rule(), nullptr) << "per_user is replaced by vip";
  EXPECT_TRUE(out[0].cache_key.empty());
  ASSERT_TRUE(out[1].rule());
  EXPECT_EQ(out[1].rule()->name, "vip");
  // Alone, per_user applies.
  out = resolve(*set, "d", {{{"user", "u1"}}});
  ASSERT_TRUE(out[0].rule());
  // An unlimited rule's replaces count too; the unlimited one answers unlimited.
  out = resolve(*set, "d", {{{"vip", "x"}}, {{"free", "x"}}, {{"user", "u"}}});
  EXPECT_EQ(out[0].rule(), nullptr);
  EXPECT_FALSE(out[0].unlimited);
  EXPECT_TRUE(out[1].unlimited);
  EXPECT_EQ(out[1].rule(), nullptr);
  EXPECT_EQ(out[2].rule(), nullptr) << "vip (replacing per_user) still matched";
}

TEST(RuleSetMatch, UnlimitedAnswersUnlimitedAndHasNoPolicy) {
  auto set = load_ok({R"(
domain: d
descriptors:
  - key: internal
    rate_limit: {unlimited: true}
)"});
  ASSERT_TRUE(set);
  auto out = resolve(*set, "d", {{{"internal", "yes"}}});
  EXPECT_TRUE(out[0].unlimited);
  EXPECT_EQ(out[0].rule(), nullptr);
  EXPECT_TRUE(out[0].cache_key.empty());
  ASSERT_EQ(set->rules().size(), 1u);
  EXPECT_FALSE(set->rules()[0]->policy);
}

TEST(RuleSetMatch, UnitsAreCaseInsensitiveWithEnvoyLengths) {
  struct Case { const char* text; Unit unit; int64_t seconds; };
  for (const Case& c : {Case{"second", Unit::kSecond, 1}, Case{"MINUTE", Unit::kMinute, 60},
                        Case{"Hour", Unit::kHour, 3600}, Case{"dAy", Unit::kDay, 86400},
                        Case{"week", Unit::kWeek, 604800}, Case{"month", Unit::kMonth, 2592000},
                        Case{"YEAR", Unit::kYear, 31536000}}) {
    auto set = load_ok({std::string("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: ") +
                        c.text + ", requests_per_unit: 3}\n"});
    ASSERT_TRUE(set);
    const Rule* r = one(*set, "d", {{"k", "v"}});
    ASSERT_TRUE(r) << c.text;
    EXPECT_EQ(r->unit, c.unit);
    EXPECT_EQ(unit_seconds(r->unit), c.seconds);
    ASSERT_TRUE(r->policy);
    EXPECT_TRUE(r->policy->counts_every_hit());
    EXPECT_EQ(r->policy->window(), Micros{c.seconds * 1'000'000});
    EXPECT_EQ(r->policy->limit(), 3);
  }
  EXPECT_EQ(unit_from_wire(7), Unit::kWeek);
  EXPECT_EQ(unit_from_wire(0), std::nullopt);
}

TEST(RuleSetMatch, CacheKeyIsPrefixDomainAndEntriesAsSent) {
  auto set = load_ok({kNested}, LoadOptions{false, "pfx_"});
  ASSERT_TRUE(set);
  auto out = resolve(*set, "edge", {{{"remote_address", "10.0.0.1"}, {"path", "/login"}},
                                    {{"remote_address", "10.0.0.2"}}});
  EXPECT_EQ(out[0].cache_key, "pfx_edge_remote_address_10.0.0.1_path_/login_");
  EXPECT_EQ(out[1].cache_key, "pfx_edge_remote_address_10.0.0.2_");
  // No rule, no key.
  out = resolve(*set, "edge", {{{"nothing", "x"}}});
  EXPECT_TRUE(out[0].cache_key.empty());
}

TEST(RuleSetMatch, CacheKeyTooLongIsAnError) {
  auto set = load_ok({kNested});
  ASSERT_TRUE(set);
  std::string big(600, 'x');
  std::vector<Entry> e{{"remote_address", big}};
  std::vector<Descriptor> d{{e, std::nullopt}};
  std::vector<Applied> out;
  Status s = set->resolve("edge", d, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cache key"), std::string::npos);
}

constexpr const char* kMetrics = R"(
domain: m
descriptors:
  - key: route
    value: "api*"
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: tenant
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: file
    value: "img*"
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: bucket
    value: "b*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 9}
  - key: shared
    value: "s*"
    share_threshold: true
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 9}
)";

TEST(RuleSetMatch, StatsKeysFollowEnvoyMetricRules) {
  auto set = load_ok({kMetrics});
  ASSERT_TRUE(set);
  auto key = [&](std::string k, std::string v) {
    auto out = resolve(*set, "m", {{{k, v}}});
    return std::make_pair(out[0].stats_key, out[0].detailed);
  };
  // A wildcard match keeps the pattern in the metric key.
  EXPECT_EQ(key("route", "api/v1"), std::make_pair(std::string("m.route_api*"), false));
  // detailed_metric: the request's key_value.
  EXPECT_EQ(key("user", "alice"), std::make_pair(std::string("m.user_alice"), true));
  // value_to_metric on a default (key-only) rule adds the value.
  EXPECT_EQ(key("tenant", "acme"), std::make_pair(std::string("m.tenant_acme"), false));
  // value_to_metric on a wildcard rule: the request's value replaces the pattern.
  EXPECT_EQ(key("file", "img42"), std::make_pair(std::string("m.file_img42"), false));
  // share_threshold: the metric keeps the pattern, with or without detailed_metric.
  EXPECT_EQ(key("bucket", "b1"), std::make_pair(std::string("m.bucket_b*"), false));
  EXPECT_EQ(key("shared", "s1"), std::make_pair(std::string("m.shared_s*"), true));
}

TEST(RuleSetMatch, ShareThresholdSharesOneCounterAcrossValues) {
  auto set = load_ok({kMetrics});
  ASSERT_TRUE(set);
  auto a = resolve(*set, "m", {{{"bucket", "b1"}}, {{"bucket", "b2"}}, {{"route", "api1"}},
                               {{"route", "api2"}}});
  EXPECT_EQ(a[0].cache_key, "m_bucket_b*_");
  EXPECT_EQ(a[0].cache_key, a[1].cache_key);
  EXPECT_EQ(a[2].cache_key, "m_route_api1_");
  EXPECT_NE(a[2].cache_key, a[3].cache_key) << "without share_threshold each value counts alone";
}

TEST(RuleSetMatch, SanitizeStatName) {
  EXPECT_EQ(sanitize_stat_name("d.remote_address_10.0.0.1"), "d.remote_address_10_0_0_1");
  EXPECT_EQ(sanitize_stat_name("d.k_a:b|c"), "d.k_a_b_c");
  EXPECT_EQ(sanitize_stat_name("d.ver_1.2.3"), "d.ver_1.2.3");
  EXPECT_EQ(sanitize_stat_name("1234.1.1.1"), "1234_1_1_1") << "Go's regexp finds 234.1.1.1";
}

TEST(RuleSetMatch, HitStatsSplitLikeEnvoy) {
  // limit 10, ratio 0.8: near threshold 8. The 9th hit (count 9 after) is near; 10th too.
  HitStats a = hit_stats(10, 0.8F, 1, true, 1, false);
  EXPECT_EQ(a.total_hits, 1u);
  EXPECT_EQ(a.within_limit, 1u);
  EXPECT_EQ(a.near_limit, 1u);
  HitStats b = hit_stats(10, 0.8F, 1, true, 5, false);  // count 5 after: not near
  EXPECT_EQ(b.near_limit, 0u);
  HitStats c = hit_stats(10, 0.8F, 3, true, 0, false);  // 7 -> 10: hits 9 and 10 are near
  EXPECT_EQ(c.near_limit, 2u);
  HitStats d = hit_stats(10, 0.8F, 1, false, 0, true);
  EXPECT_EQ(d.over_limit, 1u);
  EXPECT_EQ(d.within_limit, 0u);
  EXPECT_EQ(d.shadow_mode, 1u);
  // float32 rounding as in Go: 3 * 0.7f = 2.1 -> 2.
  EXPECT_EQ(hit_stats(3, 0.7F, 1, true, 0, false).near_limit, 1u);
}

TEST(RuleSetLoad, MergeDomainConfigJoinsFilesOfOneDomain) {
  const std::string a = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  const std::string b = "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 2}\n";
  EXPECT_EQ(load_error({a, b}), "f2.yaml:1: duplicate domain 'd' in config file");
  auto set = load_ok({a, b}, LoadOptions{true, ""});
  ASSERT_TRUE(set);
  EXPECT_TRUE(one(*set, "d", {{"a", "1"}}));
  EXPECT_TRUE(one(*set, "d", {{"b", "1"}}));
  // Merging still refuses the same descriptor twice.
  EXPECT_EQ(load_error({a, a}, LoadOptions{true, ""}),
            "f2.yaml:3: duplicate descriptor composite key 'd.a'");
}

// The all_or_nothing extension: a top-level boolean beside `domain`, off by default, refused
// anywhere else, and refused when merged files of one domain disagree.
TEST(RuleSetLoad, AllOrNothingExtensionIsPerDomain) {
  const std::string rules = "descriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  auto set = load_ok({"domain: on\nall_or_nothing: true\n" + rules, "domain: off\n" + rules,
                      "domain: no\nall_or_nothing: false\n" + rules});
  ASSERT_TRUE(set);
  EXPECT_TRUE(set->all_or_nothing("on"));
  EXPECT_FALSE(set->all_or_nothing("off"));
  EXPECT_FALSE(set->all_or_nothing("no"));
  EXPECT_FALSE(set->all_or_nothing("unknown"));

  EXPECT_EQ(load_error({"domain: d\nall_or_nothing: sometimes\n" + rules}),
            "f1.yaml:2: all_or_nothing must be true or false, got 'sometimes'");
  EXPECT_EQ(load_error({"domain: d\ndescriptors:\n  - key: a\n    all_or_nothing: true\n"}),
            "f1.yaml:4: config error, unknown key 'all_or_nothing'");
  // Merged: saying it in one file is enough; saying it differently is refused.
  auto merged = load_ok({"domain: d\nall_or_nothing: true\n" + rules,
                         "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n"},
                        LoadOptions{true, ""});
  ASSERT_TRUE(merged);
  EXPECT_TRUE(merged->all_or_nothing("d"));
  EXPECT_EQ(load_error({"domain: d\nall_or_nothing: true\n" + rules,
                        "domain: d\nall_or_nothing: false\ndescriptors:\n  - key: b\n"
                        "    rate_limit: {unit: second, requests_per_unit: 1}\n"},
                       LoadOptions{true, ""}),
            "f2.yaml:2: all_or_nothing of domain 'd' differs from another file of the same domain");
}

TEST(RuleSetLoad, ExtensionAlgorithms) {
  auto set = load_ok({R"(
domain: x
descriptors:
  - key: roll
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: sliding_window_counter}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: lb
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: leaky_bucket, mode: shape}
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: fixed_window}
)"});
  ASSERT_TRUE(set);
  const Rule* roll = one(*set, "x", {{"roll", "1"}});
  ASSERT_TRUE(roll && roll->policy);
  EXPECT_EQ(roll->policy->algorithm(), Algorithm::kSlidingWindowCounter);
  EXPECT_EQ(roll->policy->limit(), 60);
  EXPECT_EQ(roll->policy->window(), Micros{60'000'000});
  const Rule* tb = one(*set, "x", {{"tb", "1"}});
  ASSERT_TRUE(tb && tb->policy);
  EXPECT_EQ(tb->policy->algorithm(), Algorithm::kTokenBucket);
  EXPECT_DOUBLE_EQ(tb->policy->rate(), 10.0);
  EXPECT_EQ(tb->policy->limit(), 20);
  const Rule* lb = one(*set, "x", {{"lb", "1"}});
  ASSERT_TRUE(lb && lb->policy);
  EXPECT_EQ(lb->policy->leaky_mode(), LeakyMode::kShape);
  EXPECT_DOUBLE_EQ(lb->policy->rate(), 0.5);
  EXPECT_EQ(lb->policy->limit(), 30);
  const Rule* fw = one(*set, "x", {{"fw", "1"}});
  ASSERT_TRUE(fw && fw->policy);
  EXPECT_FALSE(fw->policy->counts_every_hit()) << "explicit fixed_window: ours, denied hits free";
  EXPECT_EQ(fw->policy->name().rfind("rls:", 0), 0u);
}

// The consistency extension: ratelimitd's own policy keys on a rule's rate_limit, read by the
// same reader (src/yaml/consistency_keys.h). A rule without them is exact, as before.
TEST(RuleSetLoad, ExtensionConsistency) {
  auto set = load_ok({R"(
domain: x
descriptors:
  - key: leased
    rate_limit:
      unit: second
      requests_per_unit: 1000
      algorithm: fixed_window
      consistency: lease
      lease_max: 40
      lease_ttl: 250ms
      sync_interval: 20ms
  - key: pushed
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: sliding_window_counter, consistency: async, sync_interval: 50ms}
  - key: counter_exact
    rate_limit: {unit: minute, requests_per_unit: 5, consistency: exact}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: fixed_window}
  - key: envoy
    rate_limit: {unit: minute, requests_per_unit: 5}
)"});
  ASSERT_TRUE(set);
  const Rule* leased = one(*set, "x", {{"leased", "a"}});
  ASSERT_TRUE(leased && leased->policy);
  const ConsistencyOptions& l = leased->policy->consistency();
  EXPECT_EQ(l.mode, Consistency::kLease);
  EXPECT_EQ(l.lease_max, 40);
  EXPECT_EQ(l.lease_ttl, Micros{250'000});
  EXPECT_EQ(l.sync_interval, Micros{20'000});
  EXPECT_EQ(leased->policy->limit(), 1000);
  const Rule* pushed = one(*set, "x", {{"pushed", "a"}});
  ASSERT_TRUE(pushed && pushed->policy);
  EXPECT_EQ(pushed->policy->consistency().mode, Consistency::kAsync);
  EXPECT_EQ(pushed->policy->consistency().sync_interval, Micros{50'000});
  EXPECT_EQ(pushed->policy->algorithm(), Algorithm::kSlidingWindowCounter);
  // exact on envoyproxy/ratelimit's counter changes nothing: still its counter.
  const Rule* counter = one(*set, "x", {{"counter_exact", "a"}});
  ASSERT_TRUE(counter && counter->policy);
  EXPECT_TRUE(counter->policy->counts_every_hit());
  EXPECT_EQ(counter->policy->consistency(), ConsistencyOptions{});
  // Without the keys: exact, with the defaults, exactly as before the extension.
  for (const char* k : {"plain", "envoy"}) {
    const Rule* r = one(*set, "x", {{k, "a"}});
    ASSERT_TRUE(r && r->policy) << k;
    EXPECT_EQ(r->policy->consistency(), ConsistencyOptions{}) << k;
  }
  const std::string dump = set->dump();
  EXPECT_NE(dump.find("x.leased: unit=SECOND requests_per_unit=1000, shadow_mode: false, quota_mode: false, "
                      "algorithm: fixed_window, consistency: lease\n"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("x.envoy: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false\n"),
            std::string::npos)
      << dump;
  // The same keys in a domain of ratelimitd's own file keep that file's lines in messages.
  std::vector<SourceFile> files{{"own.yaml", "domains:\n  - domain: d\n    descriptors:\n      - key: k\n"
                                             "        rate_limit:\n          unit: second\n"
                                             "          requests_per_unit: 10\n          algorithm: fixed_window\n"
                                             "          consistency: lease\n          lease_max: 11\n",
                                 "domains", 0}};
  auto r = RuleSet::load(files, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "own.yaml:10: rate_limit: lease_max must be between 0 (default: limit / 20) and the limit (10), got 11");
}

TEST(RuleSetLoad, AcceptedKeysAndValues) {
  auto set = load_ok({R"(
domain: all_keys
descriptors:
  - key: k
    value: 123
    shadow_mode: yes
    quota_mode: false
    detailed_metric: off
    metadata:
      team: payments
      tier: 2
      nested: {a: [1, "two", true]}
    rate_limit:
      name: r
      unit: second
      requests_per_unit: 4294967295
  - key: empty
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
)"});
  ASSERT_TRUE(set);
  const Rule* r = one(*set, "all_keys", {{"k", "123"}});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->shadow_mode);
  EXPECT_EQ(r->requests_per_unit, 4294967295u);
  EXPECT_EQ(r->metadata_json, R"({"team":"payments","tier":2,"nested":{"a":[1,"two",true]}})");
  EXPECT_EQ(r->file, "f1.yaml");
  EXPECT_EQ(set->rule_count(), 2u);
  const Rule* zero = one(*set, "all_keys", {{"zero", "z"}});
  ASSERT_TRUE(zero && zero->policy);
  EXPECT_EQ(zero->policy->limit(), 0);
  // An empty file list is a valid, empty rule set.
  auto empty = RuleSet::load({}, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)->empty());
  EXPECT_NE(set->dump().find("all_keys.k_123: unit=SECOND requests_per_unit=4294967295, "
                             "shadow_mode: true, quota_mode: false"),
            std::string::npos)
      << set->dump();
}

// Every configuration envoyproxy/ratelimit refuses (and the few we add), with its message.
struct Refusal {
  const char* name;
  std::string yaml;
  std::string message;
};

class RuleSetRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(RuleSetRefuses, WithFileLineAndReason) {
  EXPECT_EQ(load_error({GetParam().yaml}), GetParam().message);
}

const std::string kHead = "domain: d\ndescriptors:\n";

INSTANTIATE_TEST_SUITE_P(
    All, RuleSetRefuses,
    ::testing::Values(
        Refusal{"EmptyFile", "", "f1.yaml:1: config file cannot have empty domain"},
        Refusal{"MissingDomain", "descriptors: []\n", "f1.yaml:1: config file cannot have empty domain"},
        Refusal{"EmptyDomain", "domain: \"\"\n", "f1.yaml:1: config file cannot have empty domain"},
        Refusal{"NotAMapping", "- a\n- b\n", "f1.yaml:1: error loading config file: the document must be a mapping"},
        Refusal{"YamlSyntax", "domain: [a\n", "f1.yaml:2: error loading config file: end of sequence flow not found"},
        Refusal{"EmptyKey", kHead + "  - value: v\n", "f1.yaml:3: descriptor has empty key"},
        Refusal{"DuplicateKey", kHead + "  - key: a\n  - key: a\n",
                "f1.yaml:4: duplicate descriptor composite key 'd.a'"},
        Refusal{"DuplicateKeyValue", kHead + "  - key: a\n    value: v\n  - key: a\n    value: v\n",
                "f1.yaml:5: duplicate descriptor composite key 'd.a_v'"},
        Refusal{"DuplicateNested",
                kHead + "  - key: a\n    descriptors:\n      - key: b\n      - key: b\n",
                "f1.yaml:6: duplicate descriptor composite key 'd.a.b'"},
        Refusal{"BadUnit", kHead + "  - key: a\n    rate_limit: {unit: seconds, requests_per_unit: 1}\n",
                "f1.yaml:4: invalid rate limit unit 'seconds' (expected second, minute, hour, day, week, month or year)"},
        Refusal{"UnknownUnit", kHead + "  - key: a\n    rate_limit: {unit: unknown, requests_per_unit: 1}\n",
                "f1.yaml:4: invalid rate limit unit 'unknown' (expected second, minute, hour, day, week, month or year)"},
        Refusal{"MissingUnit", kHead + "  - key: a\n    rate_limit: {requests_per_unit: 1}\n",
                "f1.yaml:4: invalid rate limit unit '' (expected second, minute, hour, day, week, month or year)"},
        Refusal{"UnlimitedWithUnit", kHead + "  - key: a\n    rate_limit: {unlimited: true, unit: second}\n",
                "f1.yaml:4: should not specify rate limit unit when unlimited"},
        Refusal{"ReplacesItself",
                kHead + "  - key: a\n    rate_limit:\n      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: me\n",
                "f1.yaml:9: replaces should not contain name of same descriptor"},
        Refusal{"ReplacesNothing",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: \"\"\n",
                "f1.yaml:8: should not have an empty replaces entry"},
        Refusal{"ReplacesNotAList",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      replaces: x\n",
                "f1.yaml:6: replaces must be a list"},
        Refusal{"MisspelledTopKey", "domian: d\n", "f1.yaml:1: config error, unknown key 'domian'"},
        Refusal{"MisspelledDescriptorKey", kHead + "  - key: a\n    rate_limt: {unit: second}\n",
                "f1.yaml:4: config error, unknown key 'rate_limt'"},
        Refusal{"MisspelledRateLimitKey",
                kHead + "  - key: a\n    rate_limit: {unit: second, request_per_unit: 5}\n",
                "f1.yaml:4: config error, unknown key 'request_per_unit'"},
        Refusal{"ExtensionKeyOutsideRateLimit", kHead + "  - key: a\n    burst: 5\n",
                "f1.yaml:4: config error, unknown key 'burst'"},
        Refusal{"KeyTwice", kHead + "  - key: a\n    key: b\n",
                "f1.yaml:4: config error, key 'key' given twice in one mapping"},
        Refusal{"ListOfScalars", "domain: d\ndescriptors:\n  - a\n",
                "f1.yaml:3: config error, yaml file contains list of type other than map (under 'descriptors')"},
        Refusal{"FloatLeaf", kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1.5}\n",
                "f1.yaml:4: error checking config: 'requests_per_unit' has the value 1.5, a number that is not a whole 64-bit integer"},
        Refusal{"FloatValue", kHead + "  - key: a\n    value: 2.0\n",
                "f1.yaml:4: error checking config: 'value' has the value 2.0, a number that is not a whole 64-bit integer"},
        Refusal{"NegativeRequests", kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
                "f1.yaml:4: requests_per_unit must be between 0 and 4294967295, got -1"},
        Refusal{"HugeRequests", kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n",
                "f1.yaml:4: requests_per_unit must be between 0 and 4294967295, got 4294967296"},
        Refusal{"TextRequests", kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: ten}\n",
                "f1.yaml:4: requests_per_unit must be a whole number, got 'ten'"},
        Refusal{"QuotedBool", kHead + "  - key: a\n    shadow_mode: \"true\"\n",
                "f1.yaml:4: shadow_mode must be true or false, got 'true'"},
        Refusal{"BoolList", kHead + "  - key: a\n    unlimited_x: 1\n",
                "f1.yaml:4: config error, unknown key 'unlimited_x'"},
        Refusal{"RateLimitScalar", kHead + "  - key: a\n    rate_limit: 5\n",
                "f1.yaml:4: rate_limit must be a mapping"},
        Refusal{"DescriptorsScalar", "domain: d\ndescriptors: 5\n", "f1.yaml:2: descriptors must be a list"},
        Refusal{"DomainList", "domain: [a]\n",
                "f1.yaml:1: config error, yaml file contains list of type other than map (under 'domain')"},
        Refusal{"KeyMap", kHead + "  - key: {a: b}\n", "f1.yaml:3: config error, unknown key 'a'"},
        Refusal{"MetadataScalar", kHead + "  - key: a\n    metadata: 5\n",
                "f1.yaml:4: error parsing metadata: must be a mapping"},
        Refusal{"ShareThresholdWithoutWildcard", kHead + "  - key: a\n    value: v\n    share_threshold: true\n",
                "f1.yaml:3: share_threshold can only be used with wildcard values (containing '*'), but found key 'a_v'"},
        Refusal{"UnknownAlgorithm",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra}\n",
                "f1.yaml:4: unknown algorithm 'gcra' (expected fixed_window, sliding_window_log, sliding_window_counter, token_bucket or leaky_bucket)"},
        Refusal{"BurstWithoutAlgorithm",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 3}\n",
                "f1.yaml:4: 'burst' and 'mode' need 'algorithm' (token_bucket or leaky_bucket)"},
        Refusal{"BurstOnWindow",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: fixed_window, burst: 3}\n",
                "f1.yaml:4: 'burst' and 'mode' apply to token_bucket and leaky_bucket only"},
        Refusal{"ModeOnTokenBucket",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, mode: shape}\n",
                "f1.yaml:4: 'mode' applies to leaky_bucket only"},
        Refusal{"BadMode",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket, mode: drop}\n",
                "f1.yaml:4: mode must be police or shape, got 'drop'"},
        Refusal{"UnlimitedWithAlgorithm",
                kHead + "  - key: a\n    rate_limit: {unlimited: true, algorithm: token_bucket}\n",
                "f1.yaml:4: an unlimited rate_limit takes no algorithm"},
        Refusal{"ConcurrencyCannotRelease",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: concurrency}\n",
                "f1.yaml:4: the concurrency algorithm is not available to the Envoy rate limit service: RLS "
                "calls cannot release a lease (see docs/throttling.md)"},
        Refusal{"ConsistencyUnknown",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      algorithm: fixed_window\n      consistency: eventual\n",
                "f1.yaml:8: rate_limit: unknown consistency 'eventual' (expected exact, lease or async)"},
        Refusal{"ConsistencyOnEnvoyCounter",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      consistency: async\n",
                "f1.yaml:7: consistency async needs 'algorithm: fixed_window' or 'algorithm: sliding_window_counter': "
                "envoyproxy/ratelimit's default counter counts denied hits too, which only consistency exact can"},
        Refusal{"ConsistencyOnBucket",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      algorithm: token_bucket\n      consistency: lease\n",
                "f1.yaml:8: rate_limit: consistency lease is defined for fixed_window and sliding_window_counter only, "
                "not token_bucket (a bucket's units move in time, a log keeps one entry per request: see "
                "docs/distributed.md)"},
        Refusal{"LeaseMaxAboveLimit",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      algorithm: fixed_window\n      consistency: lease\n      lease_max: 6\n",
                "f1.yaml:9: rate_limit: lease_max must be between 0 (default: limit / 20) and the limit (5), got 6"},
        Refusal{"LeaseMaxText",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      algorithm: fixed_window\n      consistency: lease\n      lease_max: many\n",
                "f1.yaml:9: rate_limit.lease_max must be a whole number, got 'many'"},
        Refusal{"SyncIntervalNoUnit",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      algorithm: fixed_window\n      consistency: async\n      sync_interval: 100\n",
                "f1.yaml:9: rate_limit.sync_interval: invalid duration '100': missing unit (expected e.g. 500ms, 1s, 60s, 1m, 1h, 1d)"},
        Refusal{"SyncIntervalTooLong",
                kHead + "  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n"
                        "      algorithm: fixed_window\n      consistency: async\n      sync_interval: 2m\n",
                "f1.yaml:9: rate_limit: sync_interval must be between 1ms and 1m, got 120000000us"},
        Refusal{"ConsistencyUnlimited",
                kHead + "  - key: a\n    rate_limit: {unlimited: true, consistency: lease}\n",
                "f1.yaml:4: an unlimited rate_limit takes no consistency (nothing is counted)"},
        Refusal{"ConsistencyOutsideRateLimit", kHead + "  - key: a\n    consistency: lease\n",
                "f1.yaml:4: config error, unknown key 'consistency'"},
        Refusal{"AlgorithmZeroLimit",
                kHead + "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 0, algorithm: sliding_window_log}\n",
                "f1.yaml:4: rate_limit: limit must be between 1 and 1000000000, got 0"}),
    [](const ::testing::TestParamInfo<Refusal>& p) { return std::string(p.param.name); });

TEST(RuleSetLoad, ABadFileRefusesTheWholeSet) {
  const std::string good = "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  const std::string bad = "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: sec}\n";
  std::vector<SourceFile> files{{"/cfg/good.yaml", good}, {"/cfg/bad.yaml", bad}};
  auto r = RuleSet::load(files, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("/cfg/bad.yaml:4: invalid rate limit unit 'sec'", 0), 0u)
      << r.status().message();
}

// Issue 23 item 3: `metadata` is free-form and rendered as JSON, which expanded the 9^9 nodes of
// a 400-byte alias bomb (490 MB, 25 s). Refused at the alias that crosses the bound.
TEST(RuleSetLoad, AnAliasBombInMetadataIsRefusedWithItsLine) {
  const std::string bomb = testing_yaml::envoy_metadata_bomb();
  const std::string msg = load_error({bomb});
  EXPECT_EQ(msg.rfind("f1.yaml:12: error loading config file: YAML aliases expand the document", 0), 0u)
      << msg;
  // The same for a domain of ratelimitd's own file (a list item keeps the document's lines).
  std::vector<SourceFile> files{{"own.yaml", "domains:\n  - domain: bomb\n    metadata_anchor:\n" +
                                                 testing_yaml::alias_bomb_lines(6),
                                 "domains", 0}};
  auto r = RuleSet::load(files);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("own.yaml:10: error loading config file: YAML aliases", 0), 0u)
      << r.status().message();
}

}  // namespace
}  // namespace ratelimit::rls
