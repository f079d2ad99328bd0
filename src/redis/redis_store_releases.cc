// redis_store_releases.cc — RedisStore::watch_releases (see include/ratelimit/redis_store.h):
// the releases concurrency.lua publishes, heard on one Subscriber (subscriber.h) and handed to
// the caller as (policy, key, lease) of this store's key_prefix. The message format and its
// parser are script_codec's (parse_released).
#include "redis_store_impl.h"
#include "subscriber.h"

namespace ratelimit {
using namespace redis_detail;

namespace {

class SubscribedFeed final : public ReleaseFeed {
 public:
  SubscribedFeed(const Router& router, const ConnectionConfig& base, std::string prefix, ReleaseWatcher on_release,
                 std::function<void()> on_subscribed)
      : sub_(router, base, std::string(kReleasedChannel),
             [prefix = std::move(prefix), on_release = std::move(on_release)](std::string_view message) {
               if (auto r = parse_released(prefix, message)) on_release(r->policy, r->key, r->lease);
             },
             std::move(on_subscribed)) {}

  bool subscribed() const override { return sub_.subscribed(); }
  uint64_t subscriptions() const override { return sub_.subscriptions(); }

 private:
  Subscriber sub_;
};

}  // namespace

std::unique_ptr<ReleaseFeed> RedisStore::watch_releases(ReleaseWatcher on_release,
                                                        std::function<void()> on_subscribed) {
  return std::make_unique<SubscribedFeed>(*impl_->router, *impl_->pubsub_config, impl_->options.key_prefix,
                                          std::move(on_release), std::move(on_subscribed));
}

}  // namespace ratelimit
