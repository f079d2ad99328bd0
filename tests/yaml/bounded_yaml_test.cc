// bounded_yaml_test.cc — check_yaml_bounds (src/yaml/bounded_yaml.h): the review's nine-level
// alias bomb is refused at the alias that crosses the bound, in milliseconds, having expanded
// nothing; ordinary anchors and aliases pass; every bound (depth, nodes, aliases, expanded
// nodes, expanded bytes) refuses with the line where it was crossed; syntax errors are left to
// yaml-cpp.
#include <gtest/gtest.h>

#include <chrono>

#include "alias_bomb.h"
#include "bounded_yaml.h"

namespace ratelimit::yaml {
namespace {

TEST(YamlBounds, TheNineLevelAliasBombIsRefusedAtOnceWithItsLine) {
  const std::string bomb = testing_yaml::envoy_metadata_bomb();
  const auto t0 = std::chrono::steady_clock::now();
  const auto refused = check_yaml_bounds(bomb);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->reason.find("aliases expand the document to more than 1000000 nodes"),
            std::string::npos) << refused->reason;
  // Levels f (9^5 = 59,049 leaves) fit; g (9^6 = 531,441) twice over does not: line 12.
  EXPECT_EQ(refused->line, 12);
  // "At once": expanding the bomb would build 387 million nodes (minutes, gigabytes); refusing
  // it counts to a million at most (about a millisecond here). 5 s tells the two apart on any
  // machine, with room for a loaded one's stalls (500 ms was a guess at this machine's speed).
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(YamlBounds, OrdinaryAnchorsAndAliasesPass) {
  EXPECT_FALSE(check_yaml_bounds("defaults: &d {unit: second, requests_per_unit: 5}\n"
                                 "a: *d\nb: *d\nc: [*d, *d]\n"));
  EXPECT_FALSE(check_yaml_bounds(""));
  EXPECT_FALSE(check_yaml_bounds("a: [unclosed\n"));  // a syntax error is yaml-cpp's to report
}

TEST(YamlBounds, EachBoundRefusesWithTheLineWhereItWasCrossed) {
  YamlBounds b;
  b.max_aliases = 2;
  auto r = check_yaml_bounds("x: &x 1\na: *x\nb: *x\nc: *x\n", b);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->line, 4);
  EXPECT_EQ(r->reason, "more than 2 YAML aliases");

  b = {};
  b.max_expanded_bytes = 10;
  r = check_yaml_bounds("x: &x 123456\ny: *x\n", b);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->line, 2);
  EXPECT_NE(r->reason.find("more than 10 bytes"), std::string::npos);

  b = {};
  b.max_nodes = 5;
  r = check_yaml_bounds("a: 1\nb: 2\nc: 3\n", b);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->line, 3);
  EXPECT_EQ(r->reason, "more than 5 YAML nodes");

  // Depth, in block and flow style alike, before yaml-cpp can recurse far.
  std::string flow = "x: " + std::string(100000, '[');
  r = check_yaml_bounds(flow);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, "YAML nesting deeper than 64 levels");
  std::string block;
  for (int i = 0; i < 100; ++i) block += "- ";
  block += "x\n";
  r = check_yaml_bounds(block);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, "YAML nesting deeper than 64 levels");
  EXPECT_FALSE(check_yaml_bounds(std::string(60, '[') + std::string(60, ']')));
}

TEST(YamlBounds, AliasesInsideAnchoredCollectionsCountTheirFullSize) {
  // c holds 2 * b = 4 * a = 8 * 3 leaves (+ collections): 8 aliases in all.
  YamlBounds b;
  b.max_expanded_nodes = 60;
  EXPECT_FALSE(check_yaml_bounds("a: &a [1, 2, 3]\nb: &b [*a, *a]\nc: &c [*b, *b]\n", b));
  EXPECT_TRUE(check_yaml_bounds("a: &a [1, 2, 3]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: [*c, *c]\n", b));
}

}  // namespace
}  // namespace ratelimit::yaml
