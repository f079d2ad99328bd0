// vectors_test.cc — replays the shared, hand-worked test vectors (tests/vectors/*.json)
// against the pure decision functions (algo::decide). The memory and Redis stores replay the
// same files; together these keep every store's decisions identical.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ratelimit::vectors
