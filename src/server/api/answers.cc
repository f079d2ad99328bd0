// answers.cc — shared answer shapes (see answers.h).
#include "answers.h"

namespace ratelimit::server {

void render_store_failure(const Status& s, http::Response& out) {
  if (s.code() == StatusCode::kInvalidArgument) {
    http::render_error(400, "invalid_request", s.message(), out);
    return;
  }
  http::render_error(503, "store_error", status_code_name(s.code()), out);
}

void method_not_allowed(http::Response& out, std::string_view path, std::string_view allow) {
  std::string m = "use ";
  m += allow;
  m += " for ";
  m += path;
  http::render_error(405, "method_not_allowed", m, out);
  out.fields.push_back({"Allow", std::string(allow)});
}

void render_text(http::Response& out, unsigned status, std::string body) {
  out.clear();
  out.status = status;
  out.body = std::move(body);
  out.content_type = "text/plain; charset=utf-8";
}

bool NotFoundHandler::handle(Exchange& x) {
  http::render_error(404, "not_found", message_, x.response);
  return true;
}

bool TextHandler::handle(Exchange& x) {
  render_text(x.response, status_, body_);
  return true;
}

}  // namespace ratelimit::server
