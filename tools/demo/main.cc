// ratelimit-demo — a tour of the library in one screen: the same burst of requests sent
// through each of the five algorithms on an embedded MemoryStore, with a manual clock so the
// output is the same on every run. Shows what each algorithm admits and the Decision fields
// an HTTP layer would turn into headers.
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ratelimit/limiter.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/version.h"

namespace {

using ratelimit::Micros;
using ratelimit::Policy;

void run(const char* title, const Policy& policy) {
  ratelimit::ManualClock clock(Micros{1'700'000'000'000'000});
  auto store = std::make_shared<ratelimit::MemoryStore>(ratelimit::MemoryStoreOptions{.clock = &clock});
  ratelimit::Limiter limiter(policy, store);
  std::printf("\n%s\n  t(ms)  verdict  remaining  retry_after(ms)  delay(ms)\n", title);
  // 12 requests 50 ms apart, a pause, then 4 more: a burst larger than every limit below.
  for (int i = 0; i < 16; ++i) {
    clock.set(Micros{1'700'000'000'000'000 + (i < 12 ? i * 50'000 : 1'000'000 + i * 50'000)});
    auto d = limiter.acquire("user:42");
    if (!d.ok()) {
      std::printf("  error: %s\n", d.status().to_string().c_str());
      return;
    }
    std::printf("  %5lld  %-7s  %9lld  %15.1f  %9.1f\n",
                static_cast<long long>((clock.now().count() - 1'700'000'000'000'000) / 1000),
                d->allowed ? "allow" : "DENY", static_cast<long long>(d->remaining),
                static_cast<double>(d->retry_after.count()) / 1000.0,
                static_cast<double>(d->delay.count()) / 1000.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("%s\n", ratelimit::version_line("ratelimit-demo").c_str());
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr, "usage: ratelimit-demo [--version]  (a fixed tour of the algorithms; no flags)\n");
    return 2;
  }
  const Micros second{1'000'000};
  run("fixed_window: 5 per 1s", Policy::fixed_window(5, second).value());
  run("sliding_window_log: 5 per 1s", Policy::sliding_window_log(5, second).value());
  run("sliding_window_counter: 5 per 1s", Policy::sliding_window_counter(5, second).value());
  run("token_bucket: 5/s, burst 5", Policy::token_bucket(5, 5).value());
  run("leaky_bucket (shape): 5/s, burst 5",
      Policy::leaky_bucket(5, 5, ratelimit::LeakyMode::kShape).value());
  return 0;
}
