// algorithm_table_test.cc — the algorithm table (kAlgorithmTable, include/ratelimit/policy.h)
// against everything else that numbers the algorithms: the Redis script ids and function names,
// the Lua tables embed_lua.cmake generates from the table, and the Lua sources themselves, which
// must not number an algorithm on their own (a hand-written `[0] = fixed_window` or `id == 2`
// would drift from the table unseen). The C++ side (variant index, state types, enum order) is
// held by static_asserts in policy.h and algorithms.h; this is the part a compiler cannot see.
// No Redis here: the Lua is checked as text (the Redis tests run it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "lua_scripts.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"

namespace ratelimit::redis_detail {
namespace {

TEST(AlgorithmTable, IndexIsTheEnumAndTheNameParsesBack) {
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    const AlgorithmInfo& row = kAlgorithmTable[i];
    EXPECT_EQ(algorithm_index(row.algorithm), i);
    EXPECT_EQ(algorithm_at(i), row.algorithm);
    EXPECT_STREQ(algorithm_name(row.algorithm), row.name);
    ASSERT_TRUE(parse_algorithm(row.name).ok()) << row.name;
    EXPECT_EQ(*parse_algorithm(row.name), row.algorithm);
    EXPECT_EQ(row.kind == AlgorithmKind::kRate, i < kRateAlgorithmCount) << row.name;
  }
  EXPECT_EQ(algorithm_at(kAlgorithmCount), std::nullopt);
  EXPECT_EQ(algorithm_at(uint64_t{1} << 40), std::nullopt);
  EXPECT_EQ(kRateAlgorithmCount, 5u);  // concurrency is the one row that is not a rate
  EXPECT_EQ(algo::fresh_state(Policy::concurrency(3, Micros{1000}).value()).index(),
            algorithm_index(Algorithm::kConcurrency));
}

TEST(AlgorithmTable, EachAlgorithmsScriptAndFunctionIsAtItsIndex) {
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    const AlgorithmInfo& row = kAlgorithmTable[i];
    EXPECT_EQ(static_cast<size_t>(script_of(row.algorithm)), i);
    EXPECT_STREQ(kLuaScripts[i].name, row.name);
    const std::string fn = function_name(script_of(row.algorithm));
    EXPECT_EQ(fn, std::string("rl") + kLuaLibrary.version + "_" + row.name);
    // The one-algorithm script binds exactly its algorithm.
    EXPECT_NE(kLuaScripts[i].text.find(std::string("\nlocal algorithm = ") + row.name + "\n"),
              std::string_view::npos)
        << row.name;
  }
  EXPECT_STREQ(kLuaScripts[kScriptAcquireAll].name, "acquire_all");
}

// What embed_lua.cmake must have generated from the table.
std::string expected_ids() {
  std::string s = "local algorithm_id = {";
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    s += std::string(kAlgorithmTable[i].name) + " = " + std::to_string(i) + ", ";
  }
  return s + "}\n";
}
std::string expected_by_id() {
  std::string s = "local algorithms = {";
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    s += "[" + std::to_string(i) + "] = " + kAlgorithmTable[i].name + ", ";
  }
  return s + "}\n";
}

TEST(AlgorithmTable, TheLuaTablesAreTheGeneratedOnes) {
  const std::string_view library = kLuaLibrary.text;
  EXPECT_NE(library.find(expected_ids()), std::string_view::npos) << expected_ids();
  EXPECT_NE(library.find(expected_by_id()), std::string_view::npos) << expected_by_id();
  EXPECT_NE(library.find("local kAlgorithmCount = " + std::to_string(kAlgorithmCount) + "\n"),
            std::string_view::npos);
  // Every script knows the ids (the distributed calls compare with them).
  for (size_t s = 0; s < kScriptCount; ++s) {
    EXPECT_NE(kLuaScripts[s].text.find(expected_ids()), std::string_view::npos)
        << kLuaScripts[s].name;
  }
  for (ScriptId s : {kScriptAcquireAll, kScriptBatch, kScriptDecideMany}) {
    EXPECT_NE(kLuaScripts[s].text.find(expected_by_id()), std::string_view::npos)
        << kLuaScripts[s].name;
  }
}

TEST(AlgorithmTable, NoLuaSourceNumbersAnAlgorithmItself) {
  std::string names;
  for (const AlgorithmInfo& row : kAlgorithmTable) names += (names.empty() ? "" : "|") + std::string(row.name);
  // `[3] = token_bucket`, `[3] = 'token_bucket'`, `id == 2`, `id ~= 0`, `for id = 0, 5`.
  const std::regex numbered("\\[\\s*[0-9]+\\s*\\]\\s*=\\s*'?(" + names + ")\\b");
  const std::regex compared("\\bid\\s*[=~]=\\s*[0-9]");
  const std::regex counted("\\bfor\\s+id\\s*=\\s*[0-9]+\\s*,\\s*[0-9]");
  const std::filesystem::path dir = std::filesystem::path(RATELIMIT_SOURCE_DIR) / "src/redis/lua";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".lua") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::string code = line.substr(0, line.find("--"));  // comments may name ids
      EXPECT_FALSE(std::regex_search(code, numbered)) << entry.path() << ":" << n << ": " << line;
      EXPECT_FALSE(std::regex_search(code, compared)) << entry.path() << ":" << n << ": " << line;
      EXPECT_FALSE(std::regex_search(code, counted)) << entry.path() << ":" << n << ": " << line;
    }
  }
  EXPECT_GE(files, kAlgorithmCount);  // the directory was read
}

// The clients' list (clients/conformance/algorithms.json) is this table, row for row: every
// client's conformance test holds its own algorithm list to that file, so an algorithm added
// here and not there fails this test, and one added there and not to a client fails the client.
// Every rate algorithm has its shared vectors, which the clients run.
TEST(AlgorithmTable, TheClientsConformanceListIsTheTable) {
  const std::filesystem::path root(RATELIMIT_SOURCE_DIR);
  std::ifstream in(root / "clients/conformance/algorithms.json");
  ASSERT_TRUE(in) << "clients/conformance/algorithms.json is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::regex row(R"re(\{"name": "([a-z_]+)", "index": ([0-9]+), "kind": "([a-z]+)"\})re");
  size_t i = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row); it != std::sregex_iterator(); ++it, ++i) {
    ASSERT_LT(i, kAlgorithmCount) << "a row the table does not have: " << (*it)[0];
    const AlgorithmInfo& want = kAlgorithmTable[i];
    EXPECT_EQ((*it)[1].str(), want.name) << "row " << i;
    EXPECT_EQ((*it)[2].str(), std::to_string(i)) << want.name;
    EXPECT_EQ((*it)[3].str(), want.kind == AlgorithmKind::kRate ? "rate" : "concurrency") << want.name;
    if (want.kind == AlgorithmKind::kRate) {
      EXPECT_TRUE(std::filesystem::exists(root / "tests/vectors" / (std::string(want.name) + ".json")))
          << "no shared vectors for " << want.name;
    }
  }
  EXPECT_EQ(i, kAlgorithmCount) << "clients/conformance/algorithms.json lists " << i << " of the table's rows";
  // Every object of the file is a row the pattern read (none misspelt and skipped).
  size_t names = 0;
  for (size_t at = text.find("\"name\""); at != std::string::npos; at = text.find("\"name\"", at + 1)) ++names;
  EXPECT_EQ(names, i);
}

}  // namespace
}  // namespace ratelimit::redis_detail
