// subscriber.cc — one pub/sub subscription held open (see subscriber.h).
#include "subscriber.h"

#include <hiredis/hiredis.h>

#include "resp.h"

namespace ratelimit::redis_detail {

namespace {

// ["message", channel, payload] (RESP2 push on a subscribed connection); else empty.
bool message_payload(const redisReply* r, std::string_view* payload) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return false;
  if (reply_str(r->element[0]) != "message") return false;
  *payload = reply_str(r->element[2]);
  return true;
}

}  // namespace

Subscriber::Subscriber(const Router& router, const ConnectionConfig& base, std::string channel, OnMessage on_message,
                       std::function<void()> on_subscribed) {
  auto config = std::make_shared<ConnectionConfig>(base);
  config->resolve = [&router](uint64_t attempt) { return router.pubsub_endpoint(attempt); };
  config->on_push = [on_message = std::move(on_message)](const redisReply* r) {
    std::string_view payload;
    if (message_payload(r, &payload)) on_message(payload);
  };
  const std::vector<std::string> subscribe = {"SUBSCRIBE", channel};
  config->handshake = {HandshakeStep{encode_command(subscribe), [channel](const redisReply* r) -> Status {
                                       const bool ok = r != nullptr && r->type == REDIS_REPLY_ARRAY &&
                                                       r->elements == 3 && reply_str(r->element[0]) == "subscribe";
                                       if (ok) return {};
                                       return Status::unavailable("SUBSCRIBE " + channel +
                                                                  " was refused: " + reply_text(r));
                                     }}};
  // Called on the I/O thread at each change; a change to ready is a confirmed subscription.
  auto was_ready = std::make_shared<bool>(false);
  conn_ = std::make_shared<RespConnection>(
      io_.first(), std::move(config), counters_,
      [was_ready, on_subscribed = std::move(on_subscribed), this] {
        const bool ready = conn_->ready();
        if (ready && !*was_ready) on_subscribed();
        *was_ready = ready;
      });
  conn_->start();
}

Subscriber::~Subscriber() {
  conn_->close();
  io_.stop();
}

}  // namespace ratelimit::redis_detail
