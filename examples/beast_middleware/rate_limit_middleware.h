// rate_limit_middleware.h — in-process rate limiting for a Boost.Beast HTTP server: the C++
// counterpart of an Express middleware or a Spring interceptor.
//
//   RateLimitMiddleware limit(limiter, key_from_api_key_header, my_handler);
//   Response res = limit(req);   // 429 with the standard headers, or my_handler's answer
//                                // with RateLimit-* headers added
//
// Why it is this small: the decision comes from a ratelimit::Limiter (any store), and the
// answer is rendered by ratelimit::http::render_decision — the same function ratelimitd
// uses — so an embedded limit and the ratelimitd service answer clients identically.
// Thread-safety: operator() is const and may be called from many threads at once (the Limiter
// is thread-safe; the handler and key function must be too).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "ratelimit/http.h"
#include "ratelimit/limiter.h"

namespace example {

namespace bhttp = boost::beast::http;
using Request = bhttp::request<bhttp::string_body>;
using Response = bhttp::response<bhttp::string_body>;

// Copies a rendered answer into a Beast response.
inline Response to_beast(const ratelimit::http::Response& r, unsigned version, bool keep_alive) {
  Response res{static_cast<bhttp::status>(r.status), version};
  for (const auto& f : r.fields) res.set(f.name, f.value);
  res.set(bhttp::field::content_type, r.content_type);
  res.body() = r.body;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

class RateLimitMiddleware {
 public:
  using Handler = std::function<Response(const Request&)>;
  // Returns the rate-limit key of a request (an API key, a user id, a client address).
  // An empty key skips limiting for that request.
  using KeyFunction = std::function<std::string(const Request&)>;

  RateLimitMiddleware(ratelimit::Limiter limiter, KeyFunction key, Handler next)
      : limiter_(std::move(limiter)), key_(std::move(key)), next_(std::move(next)) {}

  Response operator()(const Request& req) const {
    const std::string key = key_(req);
    if (key.empty()) return next_(req);
    auto decision = limiter_.acquire(key);
    if (!decision.ok()) {
      // Invalid key (too long): a client error, not a reason to call the handler.
      ratelimit::http::Response err;
      ratelimit::http::render_error(400, "invalid_key", decision.status().message(), err);
      return to_beast(err, req.version(), req.keep_alive());
    }
    ratelimit::http::Response rendered;
    ratelimit::http::render_decision(*decision, ratelimit::http::PolicyInfo::of(limiter_.policy()),
                                     rendered);
    if (rendered.status != 200) return to_beast(rendered, req.version(), req.keep_alive());
    // Admitted: the handler answers; the client still learns its quota.
    Response res = next_(req);
    for (const auto& f : rendered.fields) res.set(f.name, f.value);
    return res;
  }

 private:
  ratelimit::Limiter limiter_;
  KeyFunction key_;
  Handler next_;
};

}  // namespace example
