// config_parser.h — the configuration parser's name for the one strict YAML reader
// (src/yaml/strict_reader.h, Dialect::kStrict): "file:line: reason" errors, maps checked
// against their known keys, scalars parsed by hand, one_of for enums. Internal to
// src/server/config; the Envoy rule loader reads its files with the same class in the yaml.v2
// dialect.
#pragma once

#include <yaml-cpp/yaml.h>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "strict_reader.h"
#include "try.h"  // RL_TRY, RL_TRY_ASSIGN

namespace ratelimit::server::config_detail {

using Parser = yaml::StrictReader;

}  // namespace ratelimit::server::config_detail
