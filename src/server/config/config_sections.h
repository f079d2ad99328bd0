// config_sections.h — the sections of the native configuration parsed in their own files, for
// parse_root (config.cc), each with the strict reader of config_parser.h:
//   config_store.cc     store: (memory, redis, tls, denial_cache)
//   config_policy.cc    one entry of policies: (algorithm and parameters, shadow, count_denied,
//                       consistency, request_limit, waiting)
//   config_sections.cc  limits:, envoy_api:, domains:
//   config_regions.cc   region:, regions: and each policy's scope (config_regions.h)
//   config_rlqs.cc      rlqs: (Envoy's Rate Limit Quota Service: bucket rules)
// config.cc keeps the document's root (listeners, admin, headers, forward_auth), loading a file,
// the command-line overrides and what a reload may change.
//
// Why apart: one concern per file (config.cc was 727 lines); they share only the reader.
// Invariants: each checks its map's keys (an unknown or repeated key is refused, never ignored)
// and names the file and line of every refusal; nothing is applied unless the whole file is valid
// (the Config is built aside).
// Thread-safety: pure functions over their arguments.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "config.h"
#include "config_parser.h"

namespace ratelimit::server {

// `store:` into `out`.
Status parse_store(const config_detail::Parser& p, const YAML::Node& n, StoreConfig& out);
// Policy `name` (its key node `key`, its map `n`).
Result<PolicyConfig> parse_policy(const config_detail::Parser& p, const std::string& name, const YAML::Node& key,
                                  const YAML::Node& n);
// `limits:` into `out`.
Status parse_limits(const config_detail::Parser& p, const YAML::Node& n, LimitsConfig& out);
// `envoy_api:` into `out`.
Status parse_envoy_api(const config_detail::Parser& p, const YAML::Node& n, rls::ServiceOptions& out);
// `rlqs:` into `out`.
Status parse_rlqs(const config_detail::Parser& p, const YAML::Node& n, RlqsConfig& out);
// `domains:` (loaded from the file's own text `yaml`) into c.domains.
Status parse_domains(const config_detail::Parser& p, const YAML::Node& n, std::string_view yaml,
                     std::string_view filename, Config& c);

}  // namespace ratelimit::server
