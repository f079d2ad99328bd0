// envoy_env_redis.cc — the REDIS_* settings of envoyproxy/ratelimit's environment as the
// store URL ratelimitd's store factory accepts (redis_store_url, see envoy_env.h). Apart from
// the environment reader because it is a different job: the reader checks one variable at a
// time; this turns an already-read set into one URL and checks the host lists inside it.
// Invariant: every error names REDIS_URL or REDIS_TYPE, the variables the operator sets.
#include <string>
#include <string_view>

#include "envoy_env.h"

namespace ratelimit::rls {

namespace {

std::string percent_encode(std::string_view s) {
  std::string out;
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Status check_host_ports(std::string_view list, std::string_view what) {
  size_t from = 0;
  while (from <= list.size()) {
    size_t comma = list.find(',', from);
    std::string_view hp = list.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    const size_t colon = hp.rfind(':');
    if (hp.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == hp.size()) {
      return Status::invalid_argument("REDIS_URL: '" + std::string(hp) + "' in " + std::string(what) +
                                      " is not host:port");
    }
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  return {};
}

}  // namespace

Result<std::string> redis_store_url(const EnvoySettings& s) {
  const std::string type = env_upper(s.redis_type);
  const std::string& url = s.redis_url;
  std::string cred;
  if (!s.redis_auth.empty()) {
    const size_t colon = s.redis_auth.find(':');
    if (colon == std::string::npos) cred = ":" + percent_encode(s.redis_auth) + "@";
    else cred = percent_encode(s.redis_auth.substr(0, colon)) + ":" +
                percent_encode(s.redis_auth.substr(colon + 1)) + "@";
  }
  if (url.empty()) return Status::invalid_argument("REDIS_URL: must not be empty");
  if (type == "SINGLE") {
    if (url.rfind("redis://", 0) == 0 || url.rfind("rediss://", 0) == 0) return url;
    if (s.redis_socket_type == "unix") {
      if (url[0] != '/') {
        return Status::invalid_argument("REDIS_URL: '" + url +
                                        "' is not an absolute socket path (REDIS_SOCKET_TYPE=unix)");
      }
      return "unix://" + cred + url;
    }
    if (Status st = check_host_ports(url, "a SINGLE address"); !st.is_ok()) return st;
    if (url.find(',') != std::string::npos) {
      return Status::invalid_argument("REDIS_URL: REDIS_TYPE=SINGLE takes one host:port, got '" + url + "'");
    }
    return std::string(s.redis_tls ? "rediss://" : "redis://") + cred + url;
  }
  if (s.redis_socket_type == "unix") {
    return Status::invalid_argument("REDIS_TYPE: " + s.redis_type +
                                    " needs REDIS_SOCKET_TYPE=tcp");
  }
  if (type == "CLUSTER") {
    if (Status st = check_host_ports(url, "the cluster list"); !st.is_ok()) return st;
    return std::string(s.redis_tls ? "rediss-cluster://" : "redis-cluster://") + cred + url;
  }
  // SENTINEL: "master,host:port[,host:port...]"
  const size_t comma = url.find(',');
  if (comma == std::string::npos || comma == 0 || comma + 1 == url.size()) {
    return Status::invalid_argument(
        "REDIS_URL: expected the master name and a list of urls for the sentinels, in the "
        "format: <redis master name>,<sentinel1>,...,<sentineln>; got '" + url + "'");
  }
  const std::string master = url.substr(0, comma);
  const std::string sentinels = url.substr(comma + 1);
  if (Status st = check_host_ports(sentinels, "the sentinel list"); !st.is_ok()) return st;
  return std::string("redis-sentinel://") + cred + sentinels + "/" + master;
}

}  // namespace ratelimit::rls
