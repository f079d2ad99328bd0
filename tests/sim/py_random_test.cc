// py_random_test.cc — PyRandom reproduces CPython's random.Random bit for bit, checked against
// values python3 produced (data/py_random_values.txt, made by data/make_py_random_values.py).
#include "py_random.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "patterns.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

struct Known {
  uint64_t seed;
  std::string kind;
  int index;
  std::string value;
};

std::vector<Known> load(std::map<std::string, std::string>& pattern_a) {
  std::ifstream f(SIM_TEST_DIR "/data/py_random_values.txt");
  EXPECT_TRUE(f.good());
  std::vector<Known> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    if (line.rfind("pattern_a", 0) == 0) {
      std::string tag, what, value;
      s >> tag >> what >> value;
      pattern_a[what] = value;
      continue;
    }
    Known k;
    s >> k.seed >> k.kind >> k.index >> k.value;
    out.push_back(k);
  }
  return out;
}

TEST(PyRandom, MatchesCPythonForEverySeedAndKind) {
  std::map<std::string, std::string> pattern_a;
  const auto known = load(pattern_a);
  ASSERT_EQ(known.size(), 7U * (5 + 5 + 5));
  for (const Known& k : known) {
    PyRandom rng(k.seed);
    SCOPED_TRACE("seed " + std::to_string(k.seed) + " " + k.kind + " #" + std::to_string(k.index));
    if (k.kind == "u32") {
      uint32_t v = 0;
      for (int i = 0; i <= k.index; ++i) v = rng.next_u32();
      EXPECT_EQ(v, std::stoull(k.value));
    } else {
      // repr() of a double round-trips exactly through strtod.
      const double want = std::strtod(k.value.c_str(), nullptr);
      double got = 0;
      for (int i = 0; i <= k.index; ++i) {
        got = k.kind == "random" ? rng.random() : rng.expovariate(6);
      }
      EXPECT_EQ(got, want) << "bits differ";
    }
  }
}

TEST(PyRandom, PatternAStreamMatchesPython) {
  std::map<std::string, std::string> pattern_a;
  load(pattern_a);
  ASSERT_EQ(pattern_a.size(), 3U);
  auto p = make_pattern('A', PatternParams{});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->requests.size(), std::stoull(pattern_a["count"]));
  EXPECT_EQ(p->requests.front().t_us, seconds_to_us(std::strtod(pattern_a["first"].c_str(), nullptr)));
  EXPECT_EQ(p->requests.back().t_us, seconds_to_us(std::strtod(pattern_a["last"].c_str(), nullptr)));
  // The same figures, spelled out: 184 requests from 0.1700100478791335 s to 29.97640353425597 s.
  EXPECT_EQ(p->requests.size(), 184U);
  EXPECT_EQ(p->requests.front().t_us, 170010);
  EXPECT_EQ(p->requests.back().t_us, 29976404);
}

TEST(PyRandom, DifferentSeedsGiveDifferentStreams) {
  PyRandom a(42);
  PyRandom b(43);
  EXPECT_NE(a.next_u32(), b.next_u32());
}

}  // namespace
}  // namespace ratelimit::sim
