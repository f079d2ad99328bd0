// rls_json.cc — protojson's form of RateLimitRequest / RateLimitResponse (see rls_json.h).
//
// Boost.JSON parses the body into a monotonic arena; a typed walk then checks every field the
// way protojson.Unmarshal does and names the path of the first problem.
#include "rls_json.h"

#include <cmath>
#include <limits>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "json_kind.h"
#include "ratelimit/http.h"
#include "try.h"  // RL_TRY

namespace ratelimit::rls {
namespace {

namespace json = boost::json;

Status bad(const std::string& path, std::string_view why) {
  return Status::invalid_argument((path.empty() ? std::string() : path + ": ") + std::string(why));
}

// An unsigned integer field: a JSON number with no fraction, or a decimal string.
Status unsigned_field(const json::value& v, const std::string& path, uint64_t max, uint64_t& out) {
  uint64_t u = 0;
  if (v.is_uint64()) {
    u = v.get_uint64();
  } else if (v.is_int64()) {
    if (v.get_int64() < 0) return bad(path, "must not be negative");
    u = static_cast<uint64_t>(v.get_int64());
  } else if (v.is_double()) {
    const double d = v.get_double();
    if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d > static_cast<double>(max)) {
      return bad(path, "is not a whole number in range");
    }
    u = static_cast<uint64_t>(d);
  } else if (v.is_string()) {
    const json::string& s = v.get_string();
    if (s.empty() || s.size() > 20) return bad(path, "is not a whole number");
    for (char c : s) {
      if (c < '0' || c > '9') return bad(path, "is not a whole number");
      const auto digit = static_cast<uint64_t>(c - '0');
      if (u > (std::numeric_limits<uint64_t>::max() - digit) / 10) return bad(path, "is out of range");
      u = u * 10 + digit;
    }
  } else {
    return bad(path, std::string("must be a number, got ") + json_kind_name(v.kind()));
  }
  if (u > max) return bad(path, "is above " + std::to_string(max));
  out = u;
  return {};
}

Status string_field(const json::value& v, const std::string& path, std::string& out) {
  if (v.is_null()) {
    out.clear();
    return {};
  }
  if (!v.is_string()) return bad(path, std::string("must be a string, got ") + json_kind_name(v.kind()));
  out.assign(v.get_string().data(), v.get_string().size());
  return {};
}

// protojson accepts both the JSON name and the proto name of a field.
bool is(std::string_view key, std::string_view camel, std::string_view proto) {
  return key == camel || key == proto;
}

Status unknown(const std::string& path, std::string_view key) {
  return bad(path, "unknown field \"" + std::string(key.substr(0, 64)) + "\"");
}

// An unsigned member into `out` (an integer or an optional one) unless null (unset).
template <typename T>
Status uint_member(const json::value& x, const std::string& path, uint64_t max, T& out) {
  if (x.is_null()) return {};
  uint64_t u = 0;
  RL_TRY(unsigned_field(x, path, max, u));
  out = static_cast<T>(u);
  return {};
}

// An array member (null = absent) whose length `too_many` may refuse (its reason, or ""), each
// item parsed by `item` at path[i].
template <typename T, typename TooMany, typename Item>
Status array_member(const json::value& x, const std::string& path, TooMany too_many, std::vector<T>& out,
                    Item item) {
  if (x.is_null()) return {};
  if (!x.is_array()) return bad(path, std::string("must be an array, got ") + json_kind_name(x.kind()));
  const json::array& a = x.get_array();
  if (const std::string why = too_many(a.size()); !why.empty()) return bad(path, why);
  out.resize(a.size());
  for (size_t i = 0; i < a.size(); ++i) RL_TRY(item(a[i], path + "[" + std::to_string(i) + "]", out[i]));
  return {};
}

// Each member of the object `v` through member(key, value), in order, the first error stopping;
// anything but an object is refused at `path`.
template <typename Member>
Status object_members(const json::value& v, const std::string& path, Member member) {
  if (!v.is_object()) return bad(path, std::string("must be an object, got ") + json_kind_name(v.kind()));
  for (const auto& kv : v.get_object()) RL_TRY(member(std::string_view(kv.key()), kv.value()));
  return {};
}

Status parse_entry(const json::value& v, const std::string& path, RequestEntry& e) {
  return object_members(v, path, [&](std::string_view k, const json::value& x) -> Status {
    if (k == "key") {
      if (Status s = string_field(x, path + ".key", e.key); !s.is_ok()) return s;
    } else if (k == "value") {
      if (Status s = string_field(x, path + ".value", e.value); !s.is_ok()) return s;
    } else {
      return unknown(path, k);
    }
    return {};
  });
}

Status parse_limit(const json::value& v, const std::string& path, LimitOverride& l) {
  return object_members(v, path, [&](std::string_view k, const json::value& x) -> Status {
    if (is(k, "requestsPerUnit", "requests_per_unit")) {
      RL_TRY(uint_member(x, path + "." + std::string(k), std::numeric_limits<uint32_t>::max(), l.requests_per_unit));
    } else if (k == "unit") {
      if (x.is_null()) return Status{};
      if (x.is_string()) {
        const std::string_view name(x.get_string().data(), x.get_string().size());
        bool found = false;
        for (int64_t w = 0; w <= 7; ++w) {
          const auto unit = static_cast<Unit>(w);
          if (name == unit_name(unit)) {
            l.unit = w;
            found = true;
          }
        }
        if (!found) {
          return bad(path + ".unit", "invalid value for enum type: \"" + std::string(name.substr(0, 32)) +
                                          "\" (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR)");
        }
      } else {
        uint64_t u = 0;
        if (Status s = unsigned_field(x, path + ".unit", std::numeric_limits<int32_t>::max(), u); !s.is_ok()) {
          return s;
        }
        l.unit = static_cast<int64_t>(u);
      }
    } else {
      return unknown(path, k);
    }
    return {};
  });
}

Status parse_descriptor(const json::value& v, const std::string& path, RequestDescriptor& d) {
  return object_members(v, path, [&](std::string_view k, const json::value& x) -> Status {
    if (k == "entries") {
      const auto too_many = [](size_t n) {
        return n > kMaxEntries ? "has more than " + std::to_string(kMaxEntries) + " entries" : std::string();
      };
      RL_TRY(array_member(x, path + ".entries", too_many, d.entries, parse_entry));
    } else if (k == "limit") {
      if (x.is_null()) return Status{};
      LimitOverride l;
      if (Status s = parse_limit(x, path + ".limit", l); !s.is_ok()) return s;
      d.limit = l;
    } else if (is(k, "hitsAddend", "hits_addend")) {  // UInt64Value: null = unset
      RL_TRY(uint_member(x, path + "." + std::string(k), std::numeric_limits<uint64_t>::max(), d.hits_addend));
    } else {
      return unknown(path, k);
    }
    return {};
  });
}

void append_uint(std::string& out, uint64_t v) { out += std::to_string(v); }

}  // namespace

Status parse_rate_limit_request_json(std::string_view body, RateLimitRequest& out) {
  out.clear();
  alignas(std::max_align_t) unsigned char arena[4096];
  json::monotonic_resource mr(arena, sizeof arena);
  json::parse_options opts;
  opts.max_depth = 6;
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec, &mr, opts);
  if (ec) {
    if (body.empty()) return bad("", "the request body is empty; expected a JSON RateLimitRequest");
    return bad("", "the body is not valid JSON: " + ec.message());
  }
  if (!v.is_object()) return bad("", std::string("the body must be a JSON object, got ") + json_kind_name(v.kind()));
  for (const auto& kv : v.get_object()) {
    const std::string_view k = kv.key();
    const json::value& x = kv.value();
    if (k == "domain") {
      if (Status s = string_field(x, "domain", out.domain); !s.is_ok()) return s;
    } else if (k == "descriptors") {
      const auto too_many = [](size_t n) { return check_descriptor_count(n).message(); };
      RL_TRY(array_member(x, "descriptors", too_many, out.descriptors, parse_descriptor));
    } else if (is(k, "hitsAddend", "hits_addend")) {
      RL_TRY(uint_member(x, std::string(k), std::numeric_limits<uint32_t>::max(), out.hits_addend));
    } else {
      return unknown("", k);
    }
  }
  return {};
}

namespace {

// The members of one JSON object, written in order: the braces and the commas between members.
// proto3 JSON omits a member at its default value, so each caller writes only those set.
class Members {
 public:
  explicit Members(std::string& out) : out_(out) { out_ += '{'; }
  ~Members() { out_ += '}'; }
  Members(const Members&) = delete;
  Members& operator=(const Members&) = delete;
  // Starts member `name`; the caller appends its value.
  std::string& key(const char* name) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += name;
    out_ += "\":";
    return out_;
  }
  // A member whose value is a string that needs no escaping (an enum name, a duration).
  void plain_string(const char* name, std::string_view value) {
    key(name) += '"';
    out_ += value;
    out_ += '"';
  }

 private:
  std::string& out_;
  bool first_ = true;
};

void append_current_limit(const CurrentLimit& l, std::string& out) {
  Members m(out);
  if (l.requests_per_unit != 0) append_uint(m.key("requestsPerUnit"), l.requests_per_unit);
  if (l.unit != Unit::kUnknown) m.plain_string("unit", unit_name(l.unit));
  if (!l.name.empty()) http::append_json_string(m.key("name"), l.name);
}

void append_status(const DescriptorStatus& s, std::string& out) {
  Members m(out);
  if (s.code != Code::kUnknown) m.plain_string("code", code_name(s.code));
  if (s.current_limit) append_current_limit(*s.current_limit, m.key("currentLimit"));
  if (s.limit_remaining != 0) append_uint(m.key("limitRemaining"), s.limit_remaining);
  if (s.duration_until_reset_seconds) {
    m.plain_string("durationUntilReset", std::to_string(*s.duration_until_reset_seconds) + "s");
  }
}

}  // namespace

void append_rate_limit_response_json(const RateLimitResponse& r, std::string& out) {
  Members m(out);
  if (r.overall_code != Code::kUnknown) m.plain_string("overallCode", code_name(r.overall_code));
  if (!r.statuses.empty()) {
    m.key("statuses") += '[';
    for (size_t i = 0; i < r.statuses.size(); ++i) {
      if (i) out += ',';
      append_status(r.statuses[i], out);
    }
    out += ']';
  }
  if (!r.response_headers_to_add.empty()) {
    m.key("responseHeadersToAdd") += '[';
    for (size_t i = 0; i < r.response_headers_to_add.size(); ++i) {
      if (i) out += ',';
      Members h(out);
      http::append_json_string(h.key("key"), r.response_headers_to_add[i].key);
      http::append_json_string(h.key("value"), r.response_headers_to_add[i].value);
    }
    out += ']';
  }
}

}  // namespace ratelimit::rls
