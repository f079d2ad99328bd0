// handler.cc — header-field lookup, route tables and dispatch (see handler.h).
#include "handler.h"

#include <boost/beast/core/string.hpp>

namespace ratelimit::server {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return boost::beast::iequals(boost::beast::string_view(a.data(), a.size()),
                               boost::beast::string_view(b.data(), b.size()));
}

}  // namespace

void HeaderFields::add(std::string_view name, std::string_view value) {
  Field e;
  e.name_at = static_cast<uint32_t>(bytes_.size());
  e.name_len = static_cast<uint32_t>(name.size());
  bytes_.append(name);
  e.value_at = static_cast<uint32_t>(bytes_.size());
  e.value_len = static_cast<uint32_t>(value.size());
  bytes_.append(value);
  fields_.push_back(e);
}

void HeaderFields::assign(std::string_view block, std::span<const Field> fields) {
  bytes_.assign(block);
  fields_.assign(fields.begin(), fields.end());
}

bool HeaderFields::operator==(const HeaderFields& other) const {
  if (fields_.size() != other.fields_.size()) return false;
  const std::string_view mine(bytes_), theirs(other.bytes_);
  for (size_t i = 0; i < fields_.size(); ++i) {
    const Field& a = fields_[i];
    const Field& b = other.fields_[i];
    if (mine.substr(a.name_at, a.name_len) != theirs.substr(b.name_at, b.name_len) ||
        mine.substr(a.value_at, a.value_len) != theirs.substr(b.value_at, b.value_len)) {
      return false;
    }
  }
  return true;
}

std::optional<std::string_view> HeaderFields::first(std::string_view name) const {
  const std::string_view all(bytes_);
  for (const Field& e : fields_) {
    if (iequals(all.substr(e.name_at, e.name_len), name)) return all.substr(e.value_at, e.value_len);
  }
  return std::nullopt;
}

bool HeaderFields::list(std::string_view name, std::string& out) const {
  out.clear();
  const std::string_view all(bytes_);
  bool found = false;
  for (const Field& e : fields_) {
    if (!iequals(all.substr(e.name_at, e.name_len), name)) continue;
    if (found) out += ", ";
    out.append(all.substr(e.value_at, e.value_len));
    found = true;
  }
  return found;
}

RouteTable& RouteTable::exact(std::string path, Handler& handler, Endpoint endpoint) {
  routes_.push_back({std::move(path), false, &handler, endpoint});
  return *this;
}

RouteTable& RouteTable::subtree(std::string path, Handler& handler, Endpoint endpoint) {
  routes_.push_back({std::move(path), true, &handler, endpoint});
  return *this;
}

RouteTable& RouteTable::fallback(Handler& handler, Endpoint endpoint) {
  fallback_ = {"", false, &handler, endpoint};
  return *this;
}

const RouteTable::Route& RouteTable::find(std::string_view path) const {
  for (const Route& r : routes_) {
    if (path == r.path) return r;
    if (r.subtree && path.size() > r.path.size() && path[r.path.size()] == '/' && path.starts_with(r.path)) {
      return r;
    }
  }
  return fallback_;
}

bool dispatch(const RouteTable& routes, Exchange& exchange) {
  const RouteTable::Route& route = routes.find(exchange.request.path());
  exchange.endpoint = route.endpoint;
  // Set before handle(): resume() may be called (from a store thread) before handle() returns.
  exchange.handler_ = route.handler;
  if (!route.handler->handle(exchange)) return false;
  exchange.handler_ = nullptr;
  return true;
}

void complete(Exchange& exchange) {
  Handler* h = exchange.handler_;
  exchange.handler_ = nullptr;
  if (h != nullptr) h->complete(exchange);
}

void cancel(Exchange& exchange) {
  if (exchange.handler_ != nullptr) exchange.handler_->cancel(exchange);
}

}  // namespace ratelimit::server
