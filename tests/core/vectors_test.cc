// vectors_test.cc — replays the shared, hand-worked test vectors (tests/vectors/*.json)
// against the pure decision functions (algo::decide). The memory and Redis stores replay the
// same files; together these keep every store's decisions identical.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "vectors.h"

namespace ratelimit::vectors {
namespace {

class VectorsTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(VectorsTest, PureFunctionsMatchHandWorkedVectors) {
  auto file = load_file(std::string(RATELIMIT_VECTORS_DIR) + "/" + algorithm_name(GetParam()) +
                        ".json");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->algorithm, GetParam());
  EXPECT_FALSE(file->cases.empty());
  auto failures = run_vectors_pure(*file);
  EXPECT_TRUE(failures.empty()) << format_failures(failures);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, VectorsTest, ::testing::ValuesIn(kAllAlgorithms),
                         [](const auto& p) { return std::string(algorithm_name(p.param)); });

// A vector file written to the test's temporary directory.
std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const char* kStep =
    R"({"t_us": 0, "expect": {"allowed": true, "reason": "within_limit", "remaining": 0,
        "reset_after_us": 1000000, "retry_after_us": 0, "delay_us": 0}})";

std::string one_case(const std::string& policy, const std::string& step) {
  return R"({"algorithm": "fixed_window", "cases": [{"name": "c", "policy": )" + policy +
         R"(, "steps": [)" + step + "]}]}";
}

TEST(VectorLoader, MalformedFilesAreErrorsNamingTheFileCaseAndStep) {
  const std::string policy = R"({"limit": 1, "window_us": 1000000})";
  struct Bad {
    std::string text;
    std::string mentions;
  };
  const Bad bad[] = {
      {"{not json", "malformed JSON"},
      {R"({"algorithm": "gcra", "cases": []})", "unknown algorithm"},
      {R"({"algorithm": "fixed_window", "cases": []})", "non-empty"},
      {one_case(R"({"limit": 0, "window_us": 1000000})", kStep), "invalid policy"},
      {one_case(R"({"limit": 1})", kStep), "window_us"},
      {one_case(policy, R"({"t_us": -1, "expect": {}})"), "step 0: t_us must be >= 0"},
      {one_case(policy, R"({"t_us": 0})"), "missing field 'expect'"},
      {one_case(policy, R"({"t_us": 0, "op": "take", "expect": {}})"), "unknown op"},
      {one_case(policy, R"({"t_us": 0, "op": "reset", "expect": {}})"), "no 'expect'"},
      {one_case(policy, std::string(kStep).replace(std::string(kStep).find("within_limit"), 12,
                                                  "fine")),
       "unknown reason"},
      {one_case(policy, R"({"t_us": "zero", "expect": {}})"), "must be an integer"},
  };
  for (const Bad& b : bad) {
    auto r = load_file(write_file("bad.json", b.text));
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("bad.json"), std::string::npos);
    EXPECT_NE(r.status().message().find(b.mentions), std::string::npos)
        << r.status().message();
  }
  EXPECT_EQ(load_file(::testing::TempDir() + "/missing.json").status().code(),
            StatusCode::kNotFound);
}

TEST(VectorLoader, RunnerReportsEveryMismatch) {
  const std::string policy = R"({"limit": 1, "window_us": 1000000})";
  // Second acquire at t=0 on a limit of 1 is denied, but this file claims it is admitted.
  auto file = load_file(write_file("wrong.json", one_case(policy, std::string(kStep) + ", " +
                                                                      kStep)));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto failures = run_vectors_pure(*file);
  ASSERT_EQ(failures.size(), 1u) << format_failures(failures);
  EXPECT_EQ(failures[0].step, 1u);
  EXPECT_NE(failures[0].message.find("allowed: got 0, want 1"), std::string::npos)
      << failures[0].message;
}

TEST(VectorLoader, RunPrefixesAreUnique) {
  EXPECT_NE(unique_run_prefix(), unique_run_prefix());
}

}  // namespace
}  // namespace ratelimit::vectors
