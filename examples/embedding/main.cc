// examples/embedding — docs/library.md's embedding example: a Limiter on the in-process MemoryStore,
// answering 429 with Retry-After, and two limits checked all or nothing. Built and run by ctest
// (it exits 1 if the library answers anything but what the comments say).
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "ratelimit/limiter.h"
#include "ratelimit/memory_store.h"

using namespace std::chrono_literals;
using ratelimit::Policy;

int main() {
  // A manual clock keeps this run reproducible; in a service leave `clock` unset (system clock).
  ratelimit::ManualClock clock(ratelimit::Micros{1'700'000'000'000'000});
  auto store = std::make_shared<ratelimit::MemoryStore>(
      ratelimit::MemoryStoreOptions{.max_keys = 100'000, .clock = &clock});

  // 5 requests per second on average, bursts of up to 10. Bad parameters are an error value.
  auto policy = Policy::token_bucket(5, 10);
  if (!policy.ok()) {
    std::fprintf(stderr, "%s\n", policy.status().to_string().c_str());
    return 2;
  }
  ratelimit::Limiter limiter(*policy, store);

  int admitted = 0;
  for (int i = 1; i <= 12; ++i) {
    auto d = limiter.acquire("user:42");
    if (!d.ok()) return 2;  // only for a bad key or cost; over the limit is a Decision
    if (d->allowed) {
      ++admitted;  // serve the request
      continue;
    }
    // Answer 429 with Retry-After in whole seconds, rounded up (the exact wait is in us).
    long long retry_s = (d->retry_after.count() + 999'999) / 1'000'000;
    std::printf("request %d: 429 Too Many Requests, Retry-After: %lld (exact: %lld us)\n", i,
                retry_s, static_cast<long long>(d->retry_after.count()));
  }
  std::printf("admitted %d of 12\n", admitted);  // the burst of 10

  clock.advance(200ms);  // one token comes back every 200 ms
  const bool after_wait = limiter.acquire("user:42")->allowed;
  std::printf("after 200 ms: %s\n", after_wait ? "admitted" : "denied");

  // Several limits on one key, all or nothing: 2 per second and 3 per hour.
  std::vector<Policy> login = {
      Policy::fixed_window(2, 1s)->with_name("login_per_second").value(),
      Policy::sliding_window_log(3, 1h)->with_name("login_per_hour").value()};
  std::vector<bool> answers;
  for (auto step : {0s, 0s, 0s, 1s, 1s}) {
    clock.advance(step);
    auto ds = store->acquire_all(login, "alice", 1);
    if (!ds.ok()) return 2;
    answers.push_back((*ds)[0].allowed && (*ds)[1].allowed);
  }
  // The third attempt is refused by the per-second limit and spends none of the hourly ones,
  // so the fourth still gets in; the fifth hits the hourly limit.
  std::printf("login attempts: %d %d %d %d %d\n", int{answers[0]}, int{answers[1]},
              int{answers[2]}, int{answers[3]}, int{answers[4]});

  const std::vector<bool> expected = {true, true, false, true, false};
  return admitted == 10 && after_wait && answers == expected ? 0 : 1;
}
