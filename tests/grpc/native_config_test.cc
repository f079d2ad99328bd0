// native_config_test.cc — `grpc_listen`, `envoy_api` and `domains` in ratelimitd's own YAML
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

}  // namespace
}  // namespace ratelimit::server
