// tests/install/consumer/pkg_config_main.cc — the same library seen through pkg-config
// (`pkg-config --cflags --libs ratelimit-redis`), as a project without CMake would build it:
// one decision on a MemoryStore, the Redis store's URL parsing, and RedisStore::connect (which
// links the whole store: hiredis, Boost.Asio's TLS, libssl and libcrypto — a missing library in
// the .pc file fails this link). Built with no flag but pkg-config's (its Cflags carry
// -std=c++20). Exits 0 when all answer as expected.
#include <chrono>
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
  // Port 1 on loopback refuses at once: connect() must come back with an error, not hang.
  ratelimit::RedisStoreOptions options;
  options.url = "redis://127.0.0.1:1/0";
  options.connect_timeout = std::chrono::milliseconds(500);
  auto redis = ratelimit::RedisStore::connect(options);
  std::printf("%s: first acquire %s, redis url %s, connect to a closed port %s\n",
              ratelimit::version_line("pkg-config consumer").c_str(),
              first.ok() && first->allowed ? "admitted" : "NOT admitted",
              url.ok() ? "parsed" : "NOT parsed", redis.ok() ? "SUCCEEDED" : "refused");
  return first.ok() && first->allowed && url.ok() && !redis.ok() ? 0 : 1;
}
