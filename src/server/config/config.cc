// config.cc — YAML -> Config, with a precise "file:line: reason" for anything wrong: the
// document's root (listeners, admin, headers, forward_auth), loading a file, the command-line
// overrides and what a reload may change; the other sections are parsed in their own files
// (config_sections.h lists them).
//
// Why so strict: a rate limiter that silently ignores `limt: 10` runs without the limit its
// operator believes in. Every map is checked against its known keys, every scalar is parsed by
// hand (no yaml-cpp conversions, which accept "0x10" or "1e3" as integers and throw), and every
// policy goes through the validating Policy constructors. yaml-cpp exceptions never leave this
// file.
#include "config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>

#include <boost/asio/ip/address.hpp>
#include <yaml-cpp/yaml.h>

#include "bounded_yaml.h"
#include "config_parser.h"
#include "config_regions.h"
#include "config_sections.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/store.h"

namespace ratelimit::server {
namespace {

using config_detail::Parser;

// The address at `key` of the root (listen, admin_listen, grpc_listen); nullopt when absent.
Result<std::optional<ListenAddress>> listen_key(const Parser& p, const YAML::Node& root, const char* key) {
  const YAML::Node n = root[key];
  if (!n) return std::optional<ListenAddress>();
  std::string text;
  RL_TRY_ASSIGN(text, p.string(n, key));
  auto a = parse_listen(text);
  if (!a) return p.error(n, std::string(key) + ": " + a.status().message());
  return std::optional<ListenAddress>(*a);
}

// A secret given on a command line (admin_token, resp_password): printable ASCII, no blank, so
// it fits an inline AUTH; never quoted in a message.
Result<std::string> read_secret(const Parser& p, const YAML::Node& n, const char* key, size_t min_length) {
  std::string t;
  RL_TRY_ASSIGN(t, p.string(n, key));
  if (t.size() < min_length) return p.error(n, std::string(key) + " must be at least " + std::to_string(min_length) + " characters");
  if (t.size() > 1024) return p.error(n, std::string(key) + " must be at most 1024 characters");
  for (char ch : t) {
    if (ch <= 0x20 || ch >= 0x7f) return p.error(n, std::string(key) + " must be printable ASCII without spaces");
  }
  return t;
}

// resp_listen and resp_password (a password needs the listener it protects).
Status parse_resp(const Parser& p, const YAML::Node& root, Config& c) {
  RL_TRY_ASSIGN(c.resp_listen, listen_key(p, root, "resp_listen"));
  if (c.resp_listen && c.resp_listen->port != 0) {
    for (const std::optional<ListenAddress>& other : {std::optional<ListenAddress>(c.listen), c.admin_listen, c.grpc_listen}) {
      if (other && *other == *c.resp_listen) return p.error(root["resp_listen"], "resp_listen must differ from listen, admin_listen and grpc_listen");
    }
  }
  if (const YAML::Node n = root["resp_password"]) {
    if (!c.resp_listen) return p.error(n, "resp_password protects resp_listen: set resp_listen (host:port)");
    std::string t;
    RL_TRY_ASSIGN(t, read_secret(p, n, "resp_password", 1));
    c.resp_password = std::move(t);
  }
  return {};
}

Result<Config> parse_root(const Parser& p, const YAML::Node& root, std::string_view yaml,
                          std::string_view filename) {
  if (!root || root.IsNull()) return p.error(1, "the configuration is empty (at least 'policies' is needed)");
  RL_TRY(p.check_map(root, "the configuration", {"listen", "threads", "store", "policies",
                                                 "admin_token", "limits", "forward_auth",
                                                 "grpc_listen", "envoy_api", "domains",
                                                 "headers", "problem_json", "admin_listen",
                                                 "peek_requires_admin_token", "region",
                                                 "regions", "resp_listen", "resp_password", "rlqs"}));
  Config c;
  c.source = std::string(filename);
  std::optional<ListenAddress> listen;
  RL_TRY_ASSIGN(listen, listen_key(p, root, "listen"));
  if (listen) c.listen = *listen;
  if (root["threads"]) {
    int64_t t = 0;
    RL_TRY_ASSIGN(t, p.integer(root["threads"], "threads", 0, 256));
    c.threads = static_cast<unsigned>(t);
  }
  RL_TRY_ASSIGN(c.admin_listen, listen_key(p, root, "admin_listen"));
  if (c.admin_listen && *c.admin_listen == c.listen && c.listen.port != 0) {
    return p.error(root["admin_listen"], "admin_listen must differ from listen");
  }
  if (root["store"]) RL_TRY(parse_store(p, root["store"], c.store));
  RL_TRY_ASSIGN(c.grpc_listen, listen_key(p, root, "grpc_listen"));
  if (root["envoy_api"]) RL_TRY(parse_envoy_api(p, root["envoy_api"], c.envoy_api));
  if (root["domains"]) RL_TRY(parse_domains(p, root["domains"], yaml, filename, c));
  if (root["rlqs"]) {
    if (!c.grpc_listen) return p.error(root["rlqs"], "'rlqs' is served over gRPC: set grpc_listen (host:port)");
    RL_TRY(parse_rlqs(p, root["rlqs"], c.rlqs.emplace()));
    if (!c.domains) {  // RLQS alone: ShouldRateLimit knows no domain
      auto none = rls::RuleSet::load({});
      if (!none) return none.status();
      c.domains = *none;
    }
  }
  if (c.grpc_listen && !c.domains) {
    return p.error(root["grpc_listen"], "grpc_listen serves the descriptor rules of 'domains' or 'rlqs': add at least one domain, or rlqs");
  }
  if (c.domains && !c.grpc_listen) {
    return p.error(root["domains"], "'domains' are served over gRPC: set grpc_listen (host:port)");
  }
  if (root["envoy_api"] && !c.grpc_listen) {
    return p.error(root["envoy_api"], "'envoy_api' configures the gRPC API: set grpc_listen and domains");
  }
  if (!root["policies"] && !c.domains) return p.error(root, "'policies' is required (at least one policy, or 'domains' or 'rlqs' for the gRPC API)");
  const YAML::Node pols = root["policies"];
  if (pols && (!pols.IsMap() || pols.size() == 0)) return p.error(pols, "'policies' must be a mapping of name -> policy, with at least one entry");
  for (auto it = pols.begin(); pols && it != pols.end(); ++it) {
    if (!it->first.IsScalar()) return p.error(it->first, "policy names must be plain strings");
    const std::string name = it->first.Scalar();
    if (c.policies.count(name)) return p.error(it->first, "policy '" + name + "' defined twice");
    // CL.THROTTLE's keys live under this name (resp_api.h); a policy of its own would share them.
    if (name == "cl.throttle") return p.error(it->first, "the policy name 'cl.throttle' is reserved for CL.THROTTLE (resp_listen)");
    PolicyConfig pc{Policy::fixed_window(1, Micros{1'000'000}).value(), false, 0};
    RL_TRY_ASSIGN(pc, parse_policy(p, name, it->first, it->second));
    c.policies.emplace(name, std::move(pc));
  }
  RL_TRY(parse_regions(p, root, c));  // after store and policies: it completes both
  if (root["admin_token"]) {
    // The token itself never appears in a message.
    std::string t;
    RL_TRY_ASSIGN(t, read_secret(p, root["admin_token"], "admin_token", 16));
    c.admin_token = std::move(t);
  }
  RL_TRY(parse_resp(p, root, c));
  if (root["peek_requires_admin_token"]) {
    RL_TRY_ASSIGN(c.peek_requires_admin_token, p.boolean(root["peek_requires_admin_token"], "peek_requires_admin_token"));
    if (c.peek_requires_admin_token && !c.admin_token) {
      return p.error(root["peek_requires_admin_token"], "peek_requires_admin_token needs admin_token");
    }
  }
  if (root["limits"]) RL_TRY(parse_limits(p, root["limits"], c.limits));
  if (root["headers"]) {
    std::string h;
    RL_TRY_ASSIGN(h, p.string(root["headers"], "headers"));
    const auto set = http::parse_header_set(h);
    if (!set) return p.error(root["headers"], "headers must be ietf, draft6, x-ratelimit or none (got '" + h + "')");
    c.render.headers = *set;
  }
  if (root["problem_json"]) RL_TRY_ASSIGN(c.render.problem_json, p.boolean(root["problem_json"], "problem_json"));
  if (root["forward_auth"]) {
    const YAML::Node fa = root["forward_auth"];
    RL_TRY(p.check_map(fa, "forward_auth", {"key_header", "deny_status", "trusted_proxies", "client_header"}));
    if (fa["deny_status"]) {
      int64_t s = 0;
      RL_TRY_ASSIGN(s, p.integer(fa["deny_status"], "forward_auth.deny_status", 400, 499));
      if (s != 401 && s != 403 && s != 429) {
        return p.error(fa["deny_status"], "forward_auth.deny_status must be 429, 403 or 401");
      }
      c.forward_auth_deny_status = static_cast<unsigned>(s);
    }
    if (fa["trusted_proxies"]) {
      const YAML::Node tp = fa["trusted_proxies"];
      if (!tp.IsSequence()) return p.error(tp, "forward_auth.trusted_proxies must be a list of CIDR blocks (e.g. [127.0.0.1/32, \"::1\"])");
      std::vector<std::string> cidrs;
      for (const YAML::Node& e : tp) {
        std::string cidr;
        RL_TRY_ASSIGN(cidr, p.string(e, "forward_auth.trusted_proxies"));
        auto one = TrustedProxies::parse({cidr});
        if (!one) return p.error(e, "forward_auth.trusted_proxies: " + one.status().message());
        cidrs.push_back(std::move(cidr));
      }
      RL_TRY_ASSIGN(c.trusted_proxies, TrustedProxies::parse(cidrs));
    }
    if (fa["client_header"]) {
      RL_TRY_ASSIGN(c.client_header,
                    p.one_of<ClientHeader>(fa["client_header"], "forward_auth.client_header",
                                           {{"x-forwarded-for", ClientHeader::kXForwardedFor},
                                            {"forwarded", ClientHeader::kForwarded}}));
    }
    if (fa["key_header"]) {
      RL_TRY_ASSIGN(c.forward_auth_key_header, p.string(fa["key_header"], "forward_auth.key_header"));
      if (!c.forward_auth_key_header.empty() && !http::is_field_name(c.forward_auth_key_header)) {
        return p.error(fa["key_header"], "forward_auth.key_header must be an HTTP header name");
      }
    }
  }
  return c;
}

}  // namespace

Result<ListenAddress> parse_listen(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument("'" + std::string(text) + "': " + std::string(why) +
                                    " (expected host:port, e.g. 127.0.0.1:8080 or [::1]:8080)");
  };
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("malformed IPv6 address");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  ListenAddress a;
  a.host = host == "localhost" ? "127.0.0.1" : std::string(host);
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(a.host, ec);
  if (ec || host.empty()) return bad("host must be a literal IP address or localhost");
  unsigned v = 0;
  auto [ptr, err] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (err != std::errc() || ptr != port.data() + port.size() || port.empty() || v > 65535) {
    return bad("port must be 0 ... 65535");
  }
  a.port = static_cast<uint16_t>(v);
  return a;
}

Result<Config> parse_config(std::string_view yaml, std::string_view filename) {
  Parser p(filename);
  // Nesting, nodes and aliases are bounded before yaml-cpp builds (and we walk) the document.
  if (const auto refused = yaml::check_yaml_bounds(yaml)) return p.error(refused->line, refused->reason);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return parse_root(p, root, yaml, filename);
  } catch (const YAML::Exception& e) {
    return p.error(e.mark.is_null() ? 1 : e.mark.line + 1, "YAML syntax: " + e.msg);
  } catch (const std::exception& e) {
    return p.error(1, std::string("cannot parse: ") + e.what());
  }
}

Result<Config> load_config(const std::string& path) {
  constexpr size_t kMaxConfigBytes = size_t{1} << 20;
  std::error_code fec;
  if (std::filesystem::is_directory(path, fec)) {
    return Status::invalid_argument(path + ": is a directory, not a configuration file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument(path + ": cannot open the configuration file");
  // Read at most one byte past the bound, so /dev/zero or a huge file cannot exhaust memory.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::invalid_argument(path + ": cannot read the configuration file");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) return Status::invalid_argument(path + ": larger than 1 MiB");
  return parse_config(text, path);
}

Status apply_overrides(Config& config, const Overrides& o) {
  if (o.listen) {
    auto a = parse_listen(*o.listen);
    if (!a) return Status::invalid_argument("--listen " + a.status().message());
    config.listen = *a;
  }
  if (o.store && config.regions) {
    return Status::invalid_argument("--store cannot replace the stores of 'regions' (this region's Redis is "
                                    "regions.stores." + config.regions->self + ".redis)");
  }
  if (o.store) {
    if (*o.store == "memory") {
      config.store = StoreConfig{};
    } else if (parse_redis_url(*o.store).ok()) {
      // Keep the file's redis tuning (pool, timeouts, on_failure) when it has one.
      if (config.store.type != StoreType::kRedis) config.store = StoreConfig{};
      config.store.type = StoreType::kRedis;
      config.store.url = *o.store;
    } else {
      return Status::invalid_argument(
          "--store must be 'memory' or a Redis URL (redis://, rediss://, unix://, "
          "redis-cluster://, rediss-cluster://, redis-sentinel://): " +
          parse_redis_url(*o.store).status().message());
    }
  }
  if (o.threads) {
    if (*o.threads > 256) return Status::invalid_argument("--threads must be 0 ... 256");
    config.threads = *o.threads;
  }
  return {};
}

Status check_reloadable(const Config& current, const Config& next) {
  std::string what;
  if (!(current.listen == next.listen)) what += " listen";
  if (current.threads != next.threads) what += " threads";
  if (!(current.store == next.store)) what += " store";
  if (current.regions != next.regions) what += " regions";
  if (current.grpc_listen != next.grpc_listen) what += " grpc_listen";
  if (current.admin_listen != next.admin_listen) what += " admin_listen";
  if (current.resp_listen != next.resp_listen) what += " resp_listen";
  if (current.rlqs.has_value() != next.rlqs.has_value()) what += " rlqs (added or removed)";
  if (current.rlqs && next.rlqs && current.rlqs->max_buckets != next.rlqs->max_buckets) what += " rlqs.max_buckets";
  if (current.rlqs && next.rlqs && current.rlqs->sync_interval != next.rlqs->sync_interval) what += " rlqs.sync_interval";
  const rls::ServiceOptions& a = current.envoy_api;
  const rls::ServiceOptions& b = next.envoy_api;
  if (a.response_headers != b.response_headers || a.ietf_headers != b.ietf_headers ||
      a.limit_header != b.limit_header ||
      a.remaining_header != b.remaining_header || a.reset_header != b.reset_header ||
      a.shadow_mode != b.shadow_mode ||
      a.stop_increment_when_over_limit != b.stop_increment_when_over_limit ||
      a.near_limit_ratio != b.near_limit_ratio) {
    what += " envoy_api";
  }
  if (what.empty()) return {};
  return Status::invalid_argument("changed setting(s) need a restart:" + what +
                                  " (the running configuration stays)");
}

}  // namespace ratelimit::server
