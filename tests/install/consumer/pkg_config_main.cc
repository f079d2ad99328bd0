// tests/install/consumer/pkg_config_main.cc — the same library seen through pkg-config
// (`pkg-config --cflags --libs ratelimit-redis`), as a project without CMake would build it:
// one decision on a MemoryStore and the Redis store's URL parsing. Exits 0 when both answer.
#include <cstdio>

#include <ratelimit/limiter.h>
#include <ratelimit/memory_store.h>
#include <ratelimit/redis_store.h>
#include <ratelimit/version.h>

int main() {
  auto store = std::make_shared<ratelimit::MemoryStore>();
  auto policy = ratelimit::Policy::token_bucket(1, 2);
  if (!policy.ok()) return 1;
  ratelimit::Limiter limiter(*policy, store);
  auto first = limiter.acquire("k");
  auto url = ratelimit::parse_redis_url("redis://127.0.0.1:6379/0");
  std::printf("%s: first acquire %s, redis url %s\n",
              ratelimit::version_line("pkg-config consumer").c_str(),
              first.ok() && first->allowed ? "admitted" : "NOT admitted",
              url.ok() ? "parsed" : "NOT parsed");
  return first.ok() && first->allowed && url.ok() ? 0 : 1;
}
