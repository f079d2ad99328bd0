// tests/install/subproject/main.cc — one decision through ratelimit::memory and its HTTP
// rendering, from a project that embeds the source tree. Exits 0 when both are as expected.
#include <cstdio>
#include <memory>

#include <ratelimit/http.h>
#include <ratelimit/limiter.h>
#include <ratelimit/memory_store.h>

int main() {
  auto store = std::make_shared<ratelimit::MemoryStore>();
  auto policy = ratelimit::Policy::fixed_window(1, std::chrono::seconds(60));
  if (!policy.ok()) return 1;
  ratelimit::Limiter limiter(*policy, store);
  auto first = limiter.acquire("k");
  auto second = limiter.acquire("k");
  if (!first.ok() || !second.ok()) return 1;
  auto denied = ratelimit::http::render_decision(*second, ratelimit::http::PolicyInfo::of(*policy));
  std::printf("first %s, second %s (HTTP %u)\n", first->allowed ? "admitted" : "denied",
              second->allowed ? "admitted" : "denied", denied.status);
  return first->allowed && !second->allowed && denied.status == 429 ? 0 : 1;
}
