// subscriber.h — one Redis pub/sub subscription held open: a RespConnection whose handshake ends
// with SUBSCRIBE <channel>, whose messages go to a callback, and which reconnects with the
// store's backoff and subscribes again after any loss. It knows channels and messages, nothing
// of what they mean (RedisStore::watch_releases gives the release channel its meaning).
//
// Why its own connection and thread: a subscribed RESP2 connection can carry no other command,
// so it cannot be one of the router's pipelined connections; its one I/O thread keeps a burst
// of messages off the decision connections' threads.
// Invariants:
//   - at most one connection, to the node router.pubsub_endpoint(attempt) names for each attempt
//     (so a cluster's or a sentinel deployment's subscriber moves on when its node is gone);
//   - on_subscribed runs each time a subscription is confirmed, the first included: messages
//     published while it was down are lost, and the caller makes up for them there;
//   - nothing is polled: between messages the connection is silent. A peer that vanishes
//     without closing the TCP connection is noticed only by TCP itself;
//   - no callback runs once the destructor has returned.
// Thread-safety: callbacks run on the subscriber's own I/O thread; subscribed() from any
// thread; construct and destroy from a thread that is not that one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "io_threads.h"
#include "resp_connection.h"
#include "router.h"

namespace ratelimit::redis_detail {

class Subscriber {
 public:
  using OnMessage = std::function<void(std::string_view payload)>;

  // `base`: timeouts, backoff and stream factory of the store's connections (its endpoint and
  // handshake are replaced). `router` must outlive the subscriber. Starts connecting at once.
  Subscriber(const Router& router, const ConnectionConfig& base, std::string channel, OnMessage on_message,
             std::function<void()> on_subscribed);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // True while the subscription is confirmed and the connection open.
  bool subscribed() const { return conn_->ready(); }
  // Subscriptions confirmed so far (1 after the first; each reconnection adds one).
  uint64_t subscriptions() const { return counters_.connects.load(std::memory_order_relaxed); }

 private:
  TransportCounters counters_;
  IoThreads io_{1};
  std::shared_ptr<RespConnection> conn_;
};

}  // namespace ratelimit::redis_detail
