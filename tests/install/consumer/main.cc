// tests/install/consumer/main.cc — what an outside project does with the installed library:
// a Limiter on a MemoryStore, the HTTP rendering of a denial, the Redis store's URL parsing and
// error values, and the installed test vectors replayed against MemoryStore (what a store
// author does with ratelimit::test_vectors). Exits 0 only if every answer is the expected one,
// and prints what it checked so a failure says which part broke.
#include <cstdio>
#include <memory>
#include <string>

#include <ratelimit/http.h>
#include <ratelimit/limiter.h>
#include <ratelimit/memory_store.h>
#include <ratelimit/redis_store.h>
#include <ratelimit/test_vectors/vectors.h>
#include <ratelimit/version.h>

namespace {
int failures = 0;
void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}
}  // namespace

int main() {
  std::printf("%s\n", ratelimit::version_line("consumer").c_str());
  check(ratelimit::kVersion == RATELIMIT_VERSION, "version.h is installed");

  ratelimit::ManualClock clock(ratelimit::Micros{1'700'000'000'000'000});
  auto store = std::make_shared<ratelimit::MemoryStore>(
      ratelimit::MemoryStoreOptions{.max_keys = 1000, .clock = &clock});
  auto policy = ratelimit::Policy::fixed_window(3, std::chrono::seconds(10));
  check(policy.ok(), "Policy::fixed_window(3, 10s) is valid");
  if (!policy.ok()) return 1;
  ratelimit::Limiter limiter(*policy, store);
  int admitted = 0;
  ratelimit::Decision last;
  for (int i = 0; i < 5; ++i) {
    auto d = limiter.acquire("client:1");
    if (d.ok()) {
      admitted += d->allowed ? 1 : 0;
      last = *d;
    }
  }
  check(admitted == 3, "3 of 5 admitted by a limit of 3");

  auto response = ratelimit::http::render_decision(last, ratelimit::http::PolicyInfo::of(*policy));
  const std::string* retry_after = response.field("Retry-After");
  check(response.status == 429 && retry_after != nullptr && *retry_after == "10",
        "the denial renders as 429 with Retry-After: 10");

  auto url = ratelimit::parse_redis_url("redis://127.0.0.1:6390/2");
  check(url.ok(), "parse_redis_url accepts redis://127.0.0.1:6390/2");
  ratelimit::RedisStoreOptions bad;
  bad.url = "http://127.0.0.1:6379";
  auto redis = ratelimit::RedisStore::connect(bad);
  check(!redis.ok() && redis.status().code() == ratelimit::StatusCode::kInvalidArgument,
        "RedisStore::connect refuses a non-Redis URL with invalid_argument");

  check(std::string(RATELIMIT_TEST_VECTORS_DIR) == CONSUMER_VECTORS_DIR_FROM_CMAKE,
        "RATELIMIT_TEST_VECTORS_DIR (macro) matches the CMake variable");
  auto files = ratelimit::vectors::load_all(RATELIMIT_TEST_VECTORS_DIR);
  check(files.ok() && files->size() == 6, "the six installed vector files load (five rate algorithms, concurrency)");
  if (files.ok()) {
    size_t cases = 0;
    for (const auto& f : *files) {
      ratelimit::ManualClock vclock;
      ratelimit::MemoryStore vstore(ratelimit::MemoryStoreOptions{.clock = &vclock});
      auto failed = ratelimit::vectors::run_vectors(vstore, vclock, f);
      if (!failed.empty()) std::printf("%s", ratelimit::vectors::format_failures(failed).c_str());
      check(failed.empty(), f.path.c_str());
      cases += f.cases.size();
    }
    std::printf("%zu vector cases replayed against MemoryStore\n", cases);
  }
  return failures == 0 ? 0 : 1;
}
