// config_sections.cc — the sections of the native configuration that bound and shape the
// front-ends rather than the decisions: `limits:` (request and connection bounds), `envoy_api:`
// (how ShouldRateLimit answers) and `domains:` (envoyproxy/ratelimit's descriptor rules, loaded
// by rls::RuleSet from this file's own text so its messages carry this file's lines).
// Invariants: every bound is range-checked here; header names are RFC 9110 tokens.
#include "config_sections.h"

#include <charconv>

#include "ratelimit/http.h"
#include "rule_set.h"

namespace ratelimit::server {

using config_detail::Parser;

Status parse_limits(const Parser& p, const YAML::Node& n, LimitsConfig& out) {
  RL_TRY(p.check_map(n, "limits", {"max_body_bytes", "max_header_bytes", "max_key_length",
                                   "max_cost", "request_timeout", "idle_timeout",
                                   "max_connections", "max_connections_per_client",
                                   "first_byte_timeout"}));
  int64_t v = 0;
  if (n["max_body_bytes"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_body_bytes"], "limits.max_body_bytes", 64, 1 << 20));
    out.max_body_bytes = static_cast<size_t>(v);
  }
  if (n["max_header_bytes"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_header_bytes"], "limits.max_header_bytes", 512, 1 << 20));
    out.max_header_bytes = static_cast<size_t>(v);
  }
  if (n["max_key_length"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_key_length"], "limits.max_key_length", 1, static_cast<int64_t>(kMaxKeyLength)));
    out.max_key_length = static_cast<size_t>(v);
  }
  if (n["max_cost"]) RL_TRY_ASSIGN(out.max_cost, p.integer(n["max_cost"], "limits.max_cost", 1, kMaxCost));
  if (n["request_timeout"]) RL_TRY_ASSIGN(out.request_timeout, p.duration(n["request_timeout"], "limits.request_timeout"));
  if (n["idle_timeout"]) RL_TRY_ASSIGN(out.idle_timeout, p.duration(n["idle_timeout"], "limits.idle_timeout"));
  if (n["max_connections"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_connections"], "limits.max_connections", 1, 1'000'000));
    out.max_connections = static_cast<size_t>(v);
  }
  if (n["max_connections_per_client"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_connections_per_client"], "limits.max_connections_per_client", 0, 1'000'000));
    out.max_connections_per_client = static_cast<size_t>(v);
  }
  if (n["first_byte_timeout"]) RL_TRY_ASSIGN(out.first_byte_timeout, p.duration(n["first_byte_timeout"], "limits.first_byte_timeout"));
  return {};
}

// `envoy_api`: how ShouldRateLimit answers (rls::ServiceOptions; envoyproxy/ratelimit's
// environment variables of the same meaning in parentheses there).
Status parse_envoy_api(const Parser& p, const YAML::Node& n, rls::ServiceOptions& out) {
  RL_TRY(p.check_map(n, "envoy_api", {"response_headers", "ietf_headers", "limit_header", "remaining_header",
                                      "reset_header", "shadow_mode",
                                      "stop_cache_key_increment_when_overlimit", "near_limit_ratio"}));
  const std::pair<const char*, bool*> flags[] = {
      {"response_headers", &out.response_headers},
      {"ietf_headers", &out.ietf_headers},
      {"shadow_mode", &out.shadow_mode},
      {"stop_cache_key_increment_when_overlimit", &out.stop_increment_when_over_limit}};
  for (const auto& [key, field] : flags) {
    if (n[key]) RL_TRY_ASSIGN(*field, p.boolean(n[key], std::string("envoy_api.") + key));
  }
  const std::pair<const char*, std::string*> names[] = {{"limit_header", &out.limit_header},
                                                        {"remaining_header", &out.remaining_header},
                                                        {"reset_header", &out.reset_header}};
  for (const auto& [key, field] : names) {
    if (!n[key]) continue;
    RL_TRY_ASSIGN(*field, p.string(n[key], std::string("envoy_api.") + key));
    if (!http::is_field_name(*field)) return p.error(n[key], std::string("envoy_api.") + key + " must be an HTTP header name");
  }
  if (const YAML::Node r = n["near_limit_ratio"]) {
    std::string text;
    RL_TRY_ASSIGN(text, p.string(r, "envoy_api.near_limit_ratio"));
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0 && v <= 1)) {
      return p.error(r, "envoy_api.near_limit_ratio must be a number from 0 to 1, got '" + text + "'");
    }
    out.near_limit_ratio = static_cast<float>(v);
  }
  return {};
}

// `domains`: a list of envoyproxy/ratelimit configuration documents, each loaded by rls::RuleSet
// from this file's own text (so its messages carry this file's lines).
Status parse_domains(const Parser& p, const YAML::Node& n, std::string_view yaml,
                     std::string_view filename, Config& c) {
  if (!n.IsSequence() || n.size() == 0) {
    return p.error(n, "'domains' must be a list of envoyproxy/ratelimit configurations "
                      "({domain: ..., descriptors: [...]}), with at least one entry");
  }
  std::vector<rls::SourceFile> files;
  for (size_t i = 0; i < n.size(); ++i) {
    files.push_back(rls::SourceFile{std::string(filename), std::string(yaml), "domains", i});
  }
  auto loaded = rls::RuleSet::load(files);
  if (!loaded) return loaded.status();
  c.domains = *loaded;
  return {};
}

}  // namespace ratelimit::server
