// native_config_test.cc — `grpc_listen`, `envoy_api`, `domains` and `rlqs` in ratelimitd's own YAML
// (src/server/config.cc): what loads, and every refusal with its file:line.
#include <gtest/gtest.h>

#include "config.h"

namespace ratelimit::server {
namespace {

constexpr const char* kDomains = R"(domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 10 }
  - domain: api
    descriptors:
      - key: key
        value: "test-*"
        shadow_mode: true
        rate_limit: { unit: hour, requests_per_unit: 5 }
)";

TEST(NativeGrpcConfig, LoadsDomainsBesideOrWithoutPolicies) {
  auto c = parse_config(std::string("grpc_listen: 127.0.0.1:8081\n"
                                    "envoy_api: { response_headers: true, reset_header: X-Reset, "
                                    "near_limit_ratio: 0.5, shadow_mode: true }\n") + kDomains,
                        "rl.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(c->grpc_listen);
  EXPECT_EQ(c->grpc_listen->port, 8081);
  ASSERT_TRUE(c->domains);
  EXPECT_TRUE(c->domains->has_domain("edge"));
  EXPECT_TRUE(c->domains->has_domain("api"));
  EXPECT_EQ(c->domains->rule_count(), 2U);
  EXPECT_TRUE(c->policies.empty());
  EXPECT_TRUE(c->envoy_api.response_headers);
  EXPECT_TRUE(c->envoy_api.shadow_mode);
  EXPECT_EQ(c->envoy_api.reset_header, "X-Reset");
  EXPECT_EQ(c->envoy_api.limit_header, "RateLimit-Limit");
  EXPECT_FLOAT_EQ(c->envoy_api.near_limit_ratio, 0.5F);

  auto both = parse_config(std::string("grpc_listen: \"[::1]:0\"\npolicies:\n  api: { algorithm: "
                                       "fixed_window, limit: 5, window: 1s }\n") + kDomains,
                           "rl.yaml");
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->policies.size(), 1U);
}

void expect_error(const std::string& yaml, const std::string& prefix, const std::string& part) {
  auto c = parse_config(yaml, "rl.yaml");
  ASSERT_FALSE(c.ok()) << yaml;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message().rfind(prefix, 0), 0U) << c.status().message();
  EXPECT_NE(c.status().message().find(part), std::string::npos) << c.status().message();
}

TEST(NativeGrpcConfig, RefusesWithFileAndLine) {
  expect_error("grpc_listen: 127.0.0.1:8081\n", "rl.yaml:1: ", "add at least one domain");
  expect_error(std::string("listen: 127.0.0.1:8080\n") + kDomains, "rl.yaml:3: ", "set grpc_listen");
  expect_error(std::string("grpc_listen: nowhere\n") + kDomains, "rl.yaml:1: ", "grpc_listen:");
  expect_error(std::string("grpc_listen: 127.0.0.1:1\nenvoy_api: { headers: true }\n") + kDomains,
               "rl.yaml:2: ", "unknown key 'headers' in envoy_api");
  expect_error(std::string("grpc_listen: 127.0.0.1:1\nenvoy_api: { near_limit_ratio: 2 }\n") + kDomains,
               "rl.yaml:2: ", "near_limit_ratio must be a number from 0 to 1");
  expect_error(std::string("grpc_listen: 127.0.0.1:1\nenvoy_api: { limit_header: \"a b\" }\n") + kDomains,
               "rl.yaml:2: ", "must be an HTTP header name");
  expect_error("grpc_listen: 127.0.0.1:1\ndomains: []\n", "rl.yaml:2: ", "at least one entry");
  // A refusal inside a domain carries this file's own line (the bad unit is on line 6).
  expect_error("grpc_listen: 127.0.0.1:1\n"
               "domains:\n"
               "  - domain: edge\n"
               "    descriptors:\n"
               "      - key: user\n"
               "        rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
               "rl.yaml:6: ", "fortnight");
  expect_error(std::string("grpc_listen: 127.0.0.1:1\n") + kDomains +
                   "  - domain: edge\n    descriptors: []\n",
               "rl.yaml:13: ", "duplicate domain 'edge'");
}

TEST(NativeGrpcConfig, ReloadMayChangeDomainsButNotTheListenerOrOptions) {
  auto a = parse_config(std::string("grpc_listen: 127.0.0.1:8081\n") + kDomains, "rl.yaml");
  auto b = parse_config(std::string("grpc_listen: 127.0.0.1:8081\n") +
                            "domains:\n  - domain: other\n    descriptors: []\n",
                        "rl.yaml");
  auto moved = parse_config(std::string("grpc_listen: 127.0.0.1:8082\n") + kDomains, "rl.yaml");
  auto opts = parse_config(std::string("grpc_listen: 127.0.0.1:8081\nenvoy_api: { shadow_mode: true }\n") +
                               kDomains,
                           "rl.yaml");
  ASSERT_TRUE(a.ok() && b.ok() && moved.ok() && opts.ok());
  EXPECT_TRUE(check_reloadable(*a, *b).is_ok());
  EXPECT_NE(check_reloadable(*a, *moved).message().find("grpc_listen"), std::string::npos);
  EXPECT_NE(check_reloadable(*a, *opts).message().find("envoy_api"), std::string::npos);
}

TEST(NativeGrpcConfig, ExampleLoads) {
  auto c = load_config(std::string(RATELIMIT_SOURCE_DIR) + "/examples/envoy/ratelimitd.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(c->grpc_listen);
  EXPECT_EQ(c->grpc_listen->port, 8081);  // where examples/envoy/envoy.yaml's cluster points
  ASSERT_TRUE(c->domains);
  EXPECT_TRUE(c->domains->has_domain("edge"));
  EXPECT_EQ(c->domains->rule_count(), 5U);
  EXPECT_TRUE(c->envoy_api.response_headers);
}

// `rlqs:` (Envoy's Rate Limit Quota Service, config_rlqs.cc): rules in order, the unmatched
// default, and each refusal with its line.
TEST(NativeGrpcConfig, LoadsRlqsRules) {
  auto c = parse_config("grpc_listen: 127.0.0.1:0\n"
                        "rlqs:\n"
                        "  buckets:\n"
                        "    - match: {name: api, user: \"*\"}\n"
                        "      domain: envoy\n"
                        "      limit: 100\n"
                        "      unit: minute\n"
                        "    - match: {name: health}\n"
                        "      action: deny\n"
                        "  unmatched: {limit: 5, unit: second}\n"
                        "  max_buckets: 10\n"
                        "  reporting_interval: 10s\n"
                        "  sync_interval: 250ms\n",
                        "rl.yaml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(c->rlqs);
  ASSERT_TRUE(c->domains) << "rlqs alone: an empty descriptor set, so grpc_listen has its domains";
  EXPECT_EQ(c->rlqs->max_buckets, 10U);
  EXPECT_EQ(c->rlqs->rules->reporting_interval_s, 10);
  EXPECT_EQ(c->rlqs->sync_interval, std::chrono::milliseconds(250));
  const rlqs::QuotaRules& r = *c->rlqs->rules;
  ASSERT_EQ(r.rules.size(), 2U);
  EXPECT_EQ(r.rules[0].domain, "envoy");
  EXPECT_EQ(r.rules[0].action.capacity_mrps, 1666);  // 100 per minute
  EXPECT_EQ(r.unmatched.capacity_mrps, 5000);
  // Matching: sorted pairs, "*" any value, the domain, the first rule, then unmatched.
  const rlqs::BucketKey api = {{"name", "api"}, {"user", "u1"}};
  EXPECT_EQ(&r.find("envoy", api), &r.rules[0].action);
  EXPECT_EQ(&r.find("other", api), &r.unmatched);
  EXPECT_EQ(&r.find("other", {{"name", "health"}}), &r.rules[1].action);
  EXPECT_EQ(&r.find("envoy", {{"name", "api"}}), &r.unmatched) << "user is required by the rule";
  // Absent unmatched: allow.
  auto d = parse_config("grpc_listen: 127.0.0.1:0\nrlqs: {}\n", "rl.yaml");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->rlqs->rules->unmatched.kind, rlqs::QuotaAction::Kind::kAllow);
}

TEST(NativeGrpcConfig, RefusesBadRlqsRulesWithFileAndLine) {
  expect_error("rlqs: {}\n", "rl.yaml:1: ", "set grpc_listen");
  const std::string g = "grpc_listen: 127.0.0.1:0\n";
  expect_error(g + "rlqs: {bucket: []}\n", "rl.yaml:2: ", "unknown key 'bucket' in rlqs");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {name: api}\n      limit: 5\n", "rl.yaml:4: ",
               "rlqs.buckets[0] needs both limit and unit");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {name: api}\n      limit: 5\n      unit: fortnight\n",
               "rl.yaml:6: ", "rlqs.buckets[0].unit must be second, minute, hour or day");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {}\n      action: allow\n", "rl.yaml:4: ",
               "match must be a map of bucket_id keys to values (at least one)");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {name: \"\"}\n      action: allow\n", "rl.yaml:4: ",
               "keys and values must not be empty");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {name: a}\n      action: allow\n      limit: 3\n",
               "rl.yaml:5: ", "action and limit/unit are exclusive");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {name: a}\n      limit: 2000000000\n      unit: second\n",
               "rl.yaml:5: ", "above 10^9 requests per second");
  expect_error(g + "rlqs:\n  unmatched: maybe\n", "rl.yaml:3: ", "rlqs.unmatched must be allow or deny");
  expect_error(g + "rlqs:\n  max_buckets: 0\n", "rl.yaml:3: ", "rlqs.max_buckets");
  expect_error(g + "rlqs:\n  reporting_interval: 1500ms\n", "rl.yaml:3: ", "whole seconds from 1s to 1 day");
  expect_error(g + "rlqs:\n  sync_interval: 5ms\n", "rl.yaml:3: ", "rlqs.sync_interval must be from 10ms to 60s");
  expect_error(g + "rlqs:\n  buckets:\n    - match: {name: a}\n      domain: \"\"\n      action: deny\n",
               "rl.yaml:5: ", "domain must not be empty");
}

}  // namespace
}  // namespace ratelimit::server
