// apache_directive.cc — the Apache LogFormat directives by field name (see apache_directive.h).
#include "apache_directive.h"

#include <cctype>
#include <string_view>

namespace ratelimit::sim {
namespace {

// "User-Agent" -> "user_agent", as nginx names $http_user_agent.
std::string lower_underscored(std::string_view s) {
  std::string out;
  for (char c : s) {
    out += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// %{…}t: the time parts Apache writes as numbers; an strftime pattern would need a parser
// of its own.
Result<std::string> time_part(const std::string& arg) {
  std::string_view a = arg;
  if (a.substr(0, 6) == "begin:") a.remove_prefix(6);
  else if (a.substr(0, 4) == "end:") a.remove_prefix(4);
  if (a == "sec" || a == "msec" || a == "usec" || a == "msec_frac" || a == "usec_frac") {
    return "apache_" + std::string(a);
  }
  return Status::invalid_argument("%{" + arg + "}t: only %t, %{sec}t, %{msec}t, %{usec}t, "
                                  "%{msec_frac}t and %{usec_frac}t are understood (an strftime "
                                  "pattern is not)");
}

// %i %o %C %e %n: a header, cookie, environment variable or note named by the argument.
Result<std::string> named(char d, const std::optional<std::string>& arg) {
  if (!arg || arg->empty()) {
    return Status::invalid_argument(std::string("%") + d + " needs a name: %{Name}" + d);
  }
  switch (d) {
    case 'i': return "http_" + lower_underscored(*arg);
    case 'o': return "sent_http_" + lower_underscored(*arg);
    case 'C': return "cookie_" + *arg;
    case 'e': return "apache_env_" + *arg;
    default: return "apache_note_" + *arg;
  }
}

}  // namespace

Result<std::string> apache_field_name(char d, const std::optional<std::string>& arg) {
  switch (d) {
    case 'a': case 'h': return std::string("remote_addr");
    case 'A': return std::string("server_addr");
    case 'b': case 'B': return std::string("body_bytes_sent");
    case 'f': return std::string("request_filename");
    case 'H': return std::string("server_protocol");
    case 'I': return std::string("request_length");
    case 'k': return std::string("apache_keepalive");
    case 'l': return std::string("apache_ident");
    case 'L': return std::string("apache_log_id");
    case 'm': return std::string("request_method");
    case 'O': return std::string("bytes_sent");
    case 'p': return std::string("server_port");
    case 'P': return std::string("apache_pid");
    case 'q': return std::string("query_string");
    case 'r': return std::string("request");
    case 'R': return std::string("apache_handler");
    case 's': return std::string("status");
    case 'S': return std::string("apache_bytes_transferred");
    case 'u': return std::string("remote_user");
    case 'U': return std::string("uri");
    case 'v': case 'V': return std::string("server_name");
    case 'X': return std::string("apache_connection_status");
    case 'D': return std::string("apache_duration_us");
    case 'T':
      if (!arg || *arg == "s") return std::string("apache_duration_s");
      if (*arg == "ms") return std::string("apache_duration_ms");
      if (*arg == "us") return std::string("apache_duration_us");
      return Status::invalid_argument("%{" + *arg + "}T: expected s, ms or us");
    case 'i': case 'o': case 'C': case 'e': case 'n': return named(d, arg);
    case 't': return time_part(arg.value_or(""));
    default: return Status::invalid_argument(std::string("unknown directive %") + d);
  }
}

}  // namespace ratelimit::sim
