// redis_unavailable.cc — open_redis_store for a tree whose Redis store (src/redis) has no
// RedisStore implementation yet: `store: {type: redis}` is refused with a clear message.
// CMakeLists.txt picks redis_factory.cc instead as soon as src/redis/redis_store.cc exists.
#include "store_factory.h"

namespace ratelimit::server {

Result<OpenedStore> open_redis_store(const StoreConfig&, Metrics&) {
  return Status::invalid_argument("this build has no Redis store (src/redis/redis_store.cc is missing)");
}

}  // namespace ratelimit::server
