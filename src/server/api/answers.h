// answers.h — the answer shapes every ratelimitd API shares: the one mapping of a store's
// Status to an HTTP answer, 405 with Allow, plain-text answers, and the small handlers that
// answer without deciding anything (not found, fixed text).
//
// Why one home: the native API and Envoy's /json answered a store error with code written twice;
// a client must see the same status for the same failure whichever endpoint it called.
// Thread-safety: pure functions; the handlers hold only immutable text.
#pragma once

#include <string>
#include <string_view>

#include "handler.h"
#include "ratelimit/status.h"

namespace ratelimit::server {

// A store (or the decision path) answered `s` instead of decisions: 400 invalid_request with
// the message for kInvalidArgument (bad input, nothing consumed), else 503 store_error naming
// the code (never the message: it may name hosts).
void render_store_failure(const Status& s, http::Response& out);

// 405 {"error":"method_not_allowed"} with "Allow: <allow>".
void method_not_allowed(http::Response& out, std::string_view path, std::string_view allow);

// `status` with a text/plain body.
void render_text(http::Response& out, unsigned status, std::string body);

inline bool get_or_head(const Request& r) { return r.method == Method::kGet || r.method == Method::kHead; }

// A JSON error answer: 404 {"error":"not_found","message":<message>}.
class NotFoundHandler final : public Handler {
 public:
  explicit NotFoundHandler(std::string message) : message_(std::move(message)) {}
  bool handle(Exchange& x) override;

 private:
  const std::string message_;
};

// A fixed text/plain answer (envoyproxy/ratelimit's "404 page not found", its debug index).
class TextHandler final : public Handler {
 public:
  TextHandler(unsigned status, std::string body) : status_(status), body_(std::move(body)) {}
  bool handle(Exchange& x) override;

 private:
  const unsigned status_;
  const std::string body_;
};

}  // namespace ratelimit::server
