// policy_bounds_test.cc — the policy bounds the clients read (policy_bounds.json in each client
// package: clients/node/src, clients/python/ratelimit_client, clients/go/src/ratelimit and the Java
// jar's resources), generated from include/ratelimit/policy.h and store.h. The clients validate a
// policy as src/core/policy.cc does before they call the Redis function library (which trusts its
// arguments); each used to copy every bound by hand. Now the copies are this file's output: the
// test fails when any copy differs from what the constants say, and
//   RATELIMIT_WRITE_POLICY_BOUNDS=1 build/bin/algorithm_table_tests --gtest_filter='PolicyBounds.*'
// rewrites them. The name pattern is checked against validate_policy_name byte for byte (the core
// has no constant for its characters).
#include <gtest/gtest.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"
#include "ratelimit/store.h"

namespace ratelimit {
namespace {

constexpr const char* kNamePattern = "^[A-Za-z0-9_.:-]{1,64}$";
constexpr const char* kCopies[] = {"clients/node/src/policy_bounds.json",
                                   "clients/python/ratelimit_client/policy_bounds.json",
                                   "clients/go/src/ratelimit/policy_bounds.json",
                                   "clients/java/src/main/resources/dev/ratelimit/client/policy_bounds.json"};

// Shortest text that parses back to the same double in every client's JSON reader.
std::string shortest(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string generated() {
  std::ostringstream o;
  o << "{\n"
    << "  \"generated_from\": \"include/ratelimit/policy.h and store.h by tests/redis/policy_bounds_test.cc; "
       "do not edit (RATELIMIT_WRITE_POLICY_BOUNDS=1 build/bin/algorithm_table_tests rewrites every copy)\",\n"
    << "  \"max_limit\": " << kMaxLimit << ",\n"
    << "  \"max_every_hit_limit\": " << kMaxEveryHitLimit << ",\n"
    << "  \"max_cost\": " << kMaxCost << ",\n"
    << "  \"max_sliding_log_limit\": " << kMaxSlidingLogLimit << ",\n"
    << "  \"min_window_us\": " << kMinWindow.count() << ",\n"
    << "  \"max_window_us\": " << kMaxWindow.count() << ",\n"
    << "  \"min_rate\": " << shortest(kMinRate) << ",\n"
    << "  \"max_rate\": " << shortest(kMaxRate) << ",\n"
    << "  \"max_key_bytes\": " << kMaxKeyLength << ",\n"
    << "  \"max_policy_name_length\": " << kMaxPolicyNameLength << ",\n"
    << "  \"policy_name_pattern\": \"" << kNamePattern << "\",\n"
    << "  \"exact_integer_limit\": " << (int64_t{1} << 53) << ",\n"
    << "  \"unit\": " << algo::kUnit << "\n"
    << "}\n";
  return o.str();
}

TEST(PolicyBounds, NamePatternIsValidatePolicyName) {
  const std::regex re(kNamePattern);
  for (int c = 0; c < 256; ++c) {
    const std::string name(1, static_cast<char>(c));
    EXPECT_EQ(std::regex_match(name, re), validate_policy_name(name).is_ok()) << "byte " << c;
  }
  for (size_t n : {size_t{0}, kMaxPolicyNameLength, kMaxPolicyNameLength + 1}) {
    const std::string name(n, 'a');
    EXPECT_EQ(std::regex_match(name, re), validate_policy_name(name).is_ok()) << "length " << n;
  }
}

TEST(PolicyBounds, EveryClientCopyIsGenerated) {
  const std::string want = generated();
  const std::filesystem::path root(RATELIMIT_SOURCE_DIR);
  const bool write = std::getenv("RATELIMIT_WRITE_POLICY_BOUNDS") != nullptr;
  for (const char* copy : kCopies) {
    if (write) std::ofstream(root / copy, std::ios::binary) << want;
    std::ifstream in(root / copy, std::ios::binary);
    ASSERT_TRUE(in) << copy << " is missing";
    std::stringstream got;
    got << in.rdbuf();
    EXPECT_EQ(got.str(), want) << copy << " drifted from include/ratelimit/policy.h; rewrite it with "
                               << "RATELIMIT_WRITE_POLICY_BOUNDS=1 build/bin/algorithm_table_tests";
  }
}

}  // namespace
}  // namespace ratelimit
