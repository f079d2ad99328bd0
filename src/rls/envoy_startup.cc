// envoy_startup.cc — --envoy-env start-up: settings, first load, store URL; and --check's
// report (see envoy_startup.h).
#include "envoy_startup.h"

#include <ostream>

namespace ratelimit::rls {

Result<EnvoyStartup> prepare_envoy_env(const EnvLookup& lookup) {
  auto settings = parse_envoy_env(lookup);
  if (!settings) return settings.status();
  EnvoyStartup s;
  s.settings = std::move(*settings);
  s.config_directory = config_directory(s.settings);
  s.watch_paths = watch_paths(s.settings.runtime_root, s.config_directory);
  if (s.settings.backend == Backend::kRedis) {
    auto url = redis_store_url(s.settings);
    if (!url) return url.status();
    s.store = std::move(*url);
  } else {
    s.store = "memory";
  }
  LoadOptions options;
  options.merge_domains = s.settings.merge_domain_config;
  options.cache_key_prefix = s.settings.cache_key_prefix;
  s.rules = std::make_unique<RuleSource>(s.config_directory, s.settings.runtime_ignore_dotfiles,
                                         options);
  ReloadResult r = s.rules->reload();
  if (!r.status.is_ok()) return r.status;
  return s;
}

namespace {

// The Redis URL without its password, for printing.
std::string masked(const std::string& url) {
  const size_t at = url.rfind('@');
  const size_t scheme = url.find("://");
  if (at == std::string::npos || scheme == std::string::npos || at < scheme) return url;
  return url.substr(0, scheme + 3) + "*****" + url.substr(at);
}

}  // namespace

int check_envoy_env(const EnvLookup& lookup, std::ostream& out, std::ostream& err) {
  auto s = prepare_envoy_env(lookup);
  if (!s) {
    err << "ratelimitd: " << s.status().message() << "\n";
    return 2;
  }
  for (const std::string& n : s->settings.notices) err << "ratelimitd: " << n << "\n";
  const RuleSet& rules = *s->rules->current();
  out << "configuration ok: " << rules.rule_count() << " rules from " << s->config_directory
      << "\n";
  out << "grpc: " << s->settings.grpc_host << ":" << s->settings.grpc_port << "  http: "
      << s->settings.host << ":" << s->settings.port << "  debug: " << s->settings.debug_host
      << ":" << s->settings.debug_port << "\n";
  out << "store: " << masked(s->store) << "\n";
  out << rules.dump();
  return 0;
}

}  // namespace ratelimit::rls
