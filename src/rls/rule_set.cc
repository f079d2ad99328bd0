// rule_set.cc — envoyproxy/ratelimit configuration files -> RuleSet, and resolve().
//
// Loading runs in two passes per file, as envoyproxy/ratelimit does: first every mapping key
// anywhere in the document is checked against its list of known keys and every leaf against
// the types it accepts (so `rate_limt:` or `requests_per_unit: 1.5` refuses the file), then
// the typed walk builds the descriptor tree and applies its semantic checks. Every message is
// "file:line: reason". yaml-cpp exceptions never leave this file.
//
// Matching (resolve) follows GetLimit in envoyproxy/ratelimit's config_impl.go step by step,
// including its metric-key rules; see rule_set.h for the summary.
#include "rule_set.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include <yaml-cpp/yaml.h>

#include "bounded_yaml.h"
#include "ratelimit/store.h"

// Assigns a Result's value to `lhs` or returns its error from the enclosing function.
#define RL_ASSIGN(lhs, expr)           \
  do {                                 \
    auto rl_r_ = (expr);               \
    if (!rl_r_) return rl_r_.status(); \
    lhs = std::move(*rl_r_);           \
  } while (0)

namespace ratelimit::rls {

struct RuleSet::Node {
  // Children by composite key: "key" (default) or "key_value" (value may hold '*').
  std::unordered_map<std::string, std::unique_ptr<Node>> children;
  // Children whose composite key holds '*', in file order: the first match wins.
  std::vector<std::pair<std::string, const Node*>> wildcards;
  const Rule* rule = nullptr;
  bool value_to_metric = false;
  bool share_threshold = false;
  std::string wildcard_pattern;  // the composite key, when share_threshold
  // A domain's root only: the `all_or_nothing` extension as its file(s) set it (unset = off).
  std::optional<bool> all_or_nothing;
};

namespace {

constexpr std::array<std::string_view, 16> kEnvoyKeys = {
    "domain", "key", "value", "descriptors", "rate_limit", "unit", "requests_per_unit",
    "unlimited", "shadow_mode", "quota_mode", "name", "replaces", "detailed_metric",
    "value_to_metric", "share_threshold", "metadata"};
// Our extensions, accepted inside rate_limit only.
constexpr std::array<std::string_view, 3> kExtensionKeys = {"algorithm", "burst", "mode"};
// Our extensions, accepted at a file's top level (beside `domain`) only.
constexpr std::array<std::string_view, 1> kRootExtensionKeys = {"all_or_nothing"};

bool contains(std::span<const std::string_view> list, std::string_view k) {
  return std::find(list.begin(), list.end(), k) != list.end();
}

int line_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 1 : m.line + 1;
}

bool is_plain(const YAML::Node& n) { return n.Tag() == "?"; }

// YAML 1.1 plain scalars that yaml.v2 reads as something other than a string, int or bool
// (a float, or an integer beyond int64): envoyproxy/ratelimit refuses them as leaves.
bool is_float_like(const std::string& s) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "-.inf" || s == "+.inf" ||
      s == "-.Inf" || s == "+.Inf" || s == "-.INF" || s == "+.INF" || s == ".nan" ||
      s == ".NaN" || s == ".NAN") {
    return true;
  }
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0, frac = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') { ++i; ++digits; }
  bool dot = false;
  if (i < s.size() && s[i] == '.') {
    dot = true;
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') { ++i; ++frac; }
  }
  if (digits + frac == 0) return false;
  bool exp = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    exp = true;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t e = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') { ++i; ++e; }
    if (e == 0) return false;
  }
  if (i != s.size()) return false;
  if (dot || exp) return true;
  // An integer: a float to yaml.v2 only when it does not fit an int64.
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data() + (s[0] == '+' ? 1 : 0), s.data() + s.size(), v);
  return ec == std::errc::result_out_of_range;
}

std::string json_escape(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

bool is_yaml_bool(const std::string& s, bool& v);

// `metadata` as compact JSON: plain numbers and booleans keep their type, the rest are strings.
void to_json(const YAML::Node& n, std::string& out) {
  if (n.IsMap()) {
    out += '{';
    bool first = true;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += json_escape(it->first.IsScalar() ? it->first.Scalar() : std::string("?"));
      out += ':';
      to_json(it->second, out);
    }
    out += '}';
  } else if (n.IsSequence()) {
    out += '[';
    for (size_t i = 0; i < n.size(); ++i) {
      if (i) out += ',';
      to_json(n[i], out);
    }
    out += ']';
  } else if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    bool b = false;
    int64_t iv = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), iv);
    if (is_plain(n) && !s.empty() && ec == std::errc() && p == s.data() + s.size()) {
      out += s;
    } else if (is_plain(n) && is_yaml_bool(s, b)) {
      out += b ? "true" : "false";
    } else if (is_plain(n) && is_float_like(s) && s.find_first_of("nN") == std::string::npos &&
               s.find_first_of("iI") == std::string::npos) {
      double d = 0;
      auto [q, ec2] = std::from_chars(s.data() + (s[0] == '+' ? 1 : 0), s.data() + s.size(), d);
      if (ec2 == std::errc()) {
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, d);
        out.append(buf, r.ptr);
      } else {
        out += json_escape(s);
      }
    } else {
      out += json_escape(s);
    }
  } else {
    out += "null";
  }
}

// yaml.v2's YAML 1.1 booleans.
bool is_yaml_bool(const std::string& s, bool& v) {
  static constexpr std::array<std::string_view, 11> kTrue = {
      "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::array<std::string_view, 11> kFalse = {
      "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  if (contains(kTrue, s)) { v = true; return true; }
  if (contains(kFalse, s)) { v = false; return true; }
  return false;
}

// envoyproxy/ratelimit's counter for a rule of `rpu` per `unit` (the default, and every
// request's limit override): one counter per (cache key, window), whatever the limit — so an
// override and the configured limit count together, and a reload that changes
// requests_per_unit keeps the window's count. The policy's name, which names its state in
// every store, therefore carries the unit and not the limit (stores apply the latest
// parameters seen under a name to its state).
Result<Policy> envoy_counter(int64_t rpu, Unit unit) {
  auto p = Policy::fixed_window_every_hit(rpu, Micros{unit_seconds(unit) * 1'000'000});
  if (!p) return p.status();
  return p->with_name(std::string("rls:every_hit:") + unit_name(unit));
}

}  // namespace

int64_t unit_seconds(Unit unit) {
  switch (unit) {
    case Unit::kSecond: return 1;
    case Unit::kMinute: return 60;
    case Unit::kHour: return 3600;
    case Unit::kDay: return 86400;
    case Unit::kWeek: return 7 * 86400;
    case Unit::kMonth: return 30 * 86400;
    case Unit::kYear: return 365 * 86400;
    case Unit::kUnknown: break;
  }
  return 0;
}

const char* unit_name(Unit unit) {
  switch (unit) {
    case Unit::kSecond: return "SECOND";
    case Unit::kMinute: return "MINUTE";
    case Unit::kHour: return "HOUR";
    case Unit::kDay: return "DAY";
    case Unit::kWeek: return "WEEK";
    case Unit::kMonth: return "MONTH";
    case Unit::kYear: return "YEAR";
    case Unit::kUnknown: break;
  }
  return "UNKNOWN";
}

std::optional<Unit> parse_unit(std::string_view text) {
  std::string up(text);
  for (char& c : up) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  for (int v = 1; v <= 7; ++v) {
    const auto u = static_cast<Unit>(v);
    if (up == unit_name(u)) return u;
  }
  return std::nullopt;
}

std::optional<Unit> unit_from_wire(int64_t value) {
  if (value < 1 || value > 7) return std::nullopt;
  return static_cast<Unit>(value);
}

bool wildcard_match(std::string_view pattern, std::string_view text) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  for (;;) {
    size_t star = pattern.find('*', from);
    if (star == std::string_view::npos) {
      parts.push_back(pattern.substr(from));
      break;
    }
    parts.push_back(pattern.substr(from, star - from));
    from = star + 1;
  }
  if (parts.size() == 1) return pattern == text;
  const std::string_view first = parts.front(), last = parts.back();
  if (!text.starts_with(first) || !text.ends_with(last)) return false;
  size_t fixed = 0;
  for (auto p : parts) fixed += p.size();
  if (text.size() < fixed) return false;
  std::string_view rest = text.substr(first.size(), text.size() - first.size() - last.size());
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const size_t at = rest.find(parts[i]);
    if (at == std::string_view::npos) return false;
    rest.remove_prefix(at + parts[i].size());
  }
  return true;
}

std::string sanitize_stat_name(std::string_view key) {
  std::string s(key);
  for (char& c : s) {
    if (c == ':' || c == '|') c = '_';
  }
  // Dots inside d{1,3}.d{1,3}.d{1,3}.d{1,3} (leftmost, non-overlapping, like Go's regexp).
  auto digits_at = [&](size_t i) {
    size_t n = 0;
    while (i + n < s.size() && n < 3 && s[i + n] >= '0' && s[i + n] <= '9') ++n;
    return n;
  };
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    std::array<size_t, 3> dots{};
    bool ok = true;
    for (int part = 0; part < 4 && ok; ++part) {
      const size_t n = digits_at(j);
      if (n == 0) { ok = false; break; }
      j += n;
      if (part < 3) {
        if (j < s.size() && s[j] == '.') { dots[static_cast<size_t>(part)] = j; ++j; }
        else ok = false;
      }
    }
    if (ok) {
      for (size_t d : dots) s[d] = '_';
      i = j;
    } else {
      ++i;
    }
  }
  return s;
}

HitStats hit_stats(uint32_t limit, float near_limit_ratio, uint64_t hits, bool allowed,
                   int64_t remaining, bool shadow) {
  HitStats h;
  h.total_hits = hits;
  // float32 product, then floor: the same bits as Go's float32(limit) * nearLimitRatio.
  const auto near = static_cast<uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(limit) * near_limit_ratio)));
  if (allowed) {
    const uint64_t after = limit - static_cast<uint64_t>(std::max<int64_t>(remaining, 0));
    const uint64_t before = after >= hits ? after - hits : 0;
    h.within_limit = hits;
    if (after > near) h.near_limit = before >= near ? hits : after - near;
  } else {
    h.over_limit = hits;
    if (shadow) h.shadow_mode = hits;
  }
  return h;
}

// ---------------------------------------------------------------------------------------
// Loading

// Item `item` of the top-level list `list` of `doc`; an undefined node when there is none.
YAML::Node item_of(const YAML::Node& doc, const std::string& list, size_t item) {
  if (!doc.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node l = doc[list];
  if (!l.IsSequence() || item >= l.size()) return YAML::Node(YAML::NodeType::Undefined);
  return l[item];
}

class Loader {
 public:
  Loader(RuleSet& set, const LoadOptions& options) : set_(set), options_(options) {}

  Status load_file(const SourceFile& f) {
    file_ = f.name;
    YAML::Node doc;
    // Nesting, nodes and aliases are bounded before yaml-cpp builds (and we walk) the document:
    // `metadata` is rendered as JSON, which expands every alias in it.
    if (const auto refused = yaml::check_yaml_bounds(f.text)) {
      return error(refused->line, "error loading config file: " + refused->reason);
    }
    try {
      doc = YAML::Load(f.text);
    } catch (const YAML::Exception& e) {
      return error(e.mark.is_null() ? 1 : e.mark.line + 1,
                   "error loading config file: " + e.msg);
    }
    // A node copied (not assigned: yaml-cpp assignment writes through) from the document, so
    // an item of a list keeps its own lines.
    const YAML::Node root = f.list.empty() ? doc : item_of(doc, f.list, f.item);
    if (!root) return error(line_of(doc), "'" + f.list + "' has no item " + std::to_string(f.item));
    try {
      return load_root(root);
    } catch (const YAML::Exception& e) {
      return error(e.mark.is_null() ? 1 : e.mark.line + 1,
                   "error loading config file: " + e.msg);
    }
  }

 private:
  Status error(int line, std::string_view reason) const {
    return Status::invalid_argument(file_ + ":" + std::to_string(line) + ": " +
                                    std::string(reason));
  }
  Status error(const YAML::Node& n, std::string_view reason) const {
    return error(line_of(n), reason);
  }

  // Pass 1: envoyproxy/ratelimit's validateYamlKeys, plus duplicate keys and our extensions.
  Status check_keys(const YAML::Node& map, bool in_rate_limit, bool at_root = false) const {
    std::unordered_set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node k = it->first;
      if (!k.IsScalar()) return error(k, "config error, key is not of type string");
      const std::string& name = k.Scalar();
      const bool ext = (in_rate_limit && contains(kExtensionKeys, name)) ||
                       (at_root && contains(kRootExtensionKeys, name));
      if (!contains(kEnvoyKeys, name) && !ext) {
        return error(k, "config error, unknown key '" + name + "'");
      }
      if (!seen.insert(name).second) {
        return error(k, "config error, key '" + name + "' given twice in one mapping");
      }
      if (name == "metadata") continue;  // free-form, as in envoyproxy/ratelimit
      const YAML::Node v = it->second;
      if (v.IsSequence()) {
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].IsMap()) {
            return error(v[i], "config error, yaml file contains list of type other than map "
                               "(under '" + name + "')");
          }
          if (Status s = check_keys(v[i], false); !s.is_ok()) return s;
        }
      } else if (v.IsMap()) {
        if (Status s = check_keys(v, name == "rate_limit"); !s.is_ok()) return s;
      } else if (v.IsScalar() && is_plain(v) && is_float_like(v.Scalar())) {
        return error(v, "error checking config: '" + name + "' has the value " + v.Scalar() +
                            ", a number that is not a whole 64-bit integer");
      }
    }
    return {};
  }

  // Typed leaves, as yaml.v2 decodes them into envoyproxy/ratelimit's structs.
  Result<std::string> string(const YAML::Node& n, std::string_view what) const {
    if (!n || n.IsNull()) return std::string();
    if (!n.IsScalar()) return error(n, std::string(what) + " must be a string");
    return n.Scalar();
  }
  Result<bool> boolean(const YAML::Node& n, std::string_view what) const {
    if (!n || n.IsNull()) return false;
    bool v = false;
    if (n.IsScalar() && is_plain(n) && is_yaml_bool(n.Scalar(), v)) return v;
    return error(n, std::string(what) + " must be true or false, got " +
                        (n.IsScalar() ? "'" + n.Scalar() + "'" : std::string("a collection")));
  }
  Result<int64_t> integer(const YAML::Node& n, std::string_view what, int64_t lo,
                          int64_t hi) const {
    if (!n.IsScalar() || !is_plain(n)) return error(n, std::string(what) + " must be a whole number");
    const std::string& s = n.Scalar();
    int64_t v = 0;
    const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
    auto [p, ec] = std::from_chars(b, s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
      return error(n, std::string(what) + " must be a whole number, got '" + s + "'");
    }
    if (v < lo || v > hi) {
      return error(n, std::string(what) + " must be between " + std::to_string(lo) + " and " +
                          std::to_string(hi) + ", got " + s);
    }
    return v;
  }
  Status sequence(const YAML::Node& n, std::string_view what) const {
    if (!n || n.IsNull() || n.IsSequence()) return {};
    return error(n, std::string(what) + " must be a list");
  }

  Status load_root(const YAML::Node& root) {
    if (root.IsNull()) return error(1, "config file cannot have empty domain");
    if (!root.IsMap()) return error(root, "error loading config file: the document must be a mapping");
    if (Status s = check_keys(root, false, true); !s.is_ok()) return s;
    auto domain = string(root["domain"], "domain");
    if (!domain) return domain.status();
    if (domain->empty()) return error(root, "config file cannot have empty domain");
    const YAML::Node descriptors = root["descriptors"];
    if (Status s = sequence(descriptors, "descriptors"); !s.is_ok()) return s;

    auto [it, fresh] = set_.domains_.try_emplace(*domain);
    if (!fresh && !options_.merge_domains) {
      return error(root["domain"], "duplicate domain '" + *domain + "' in config file");
    }
    if (fresh) it->second = std::make_unique<RuleSet::Node>();
    if (root["all_or_nothing"]) {
      bool all = false;
      RL_ASSIGN(all, boolean(root["all_or_nothing"], "all_or_nothing"));
      // Merged files of one domain may each say it, but not differently: which one would win
      // is an accident of file order.
      if (it->second->all_or_nothing && *it->second->all_or_nothing != all) {
        return error(root["all_or_nothing"], "all_or_nothing of domain '" + *domain +
                                                 "' differs from another file of the same domain");
      }
      it->second->all_or_nothing = all;
    }
    domain_ = *domain;
    return load_descriptors(*it->second, *domain + ".", descriptors);
  }

  Status load_descriptors(RuleSet::Node& parent, const std::string& parent_key,
                          const YAML::Node& list) {
    if (!list || list.IsNull()) return {};
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node d = list[i];
      auto key = string(d["key"], "key");
      if (!key) return key.status();
      if (key->empty()) return error(d, "descriptor has empty key");
      auto value = string(d["value"], "value");
      if (!value) return value.status();
      std::string composite = *key;
      if (!value->empty()) composite += "_" + *value;
      const std::string full_key = parent_key + composite;
      if (parent.children.count(composite)) {
        return error(d, "duplicate descriptor composite key '" + full_key + "'");
      }

      auto node = std::make_unique<RuleSet::Node>();
      bool shadow = false, quota = false, detailed = false;
      RL_ASSIGN(shadow, boolean(d["shadow_mode"], "shadow_mode"));
      RL_ASSIGN(quota, boolean(d["quota_mode"], "quota_mode"));
      RL_ASSIGN(detailed, boolean(d["detailed_metric"], "detailed_metric"));
      RL_ASSIGN(node->value_to_metric, boolean(d["value_to_metric"], "value_to_metric"));
      RL_ASSIGN(node->share_threshold, boolean(d["share_threshold"], "share_threshold"));

      const YAML::Node metadata = d["metadata"];
      std::string metadata_json;
      if (metadata && !metadata.IsNull()) {
        if (!metadata.IsMap()) return error(metadata, "error parsing metadata: must be a mapping");
        to_json(metadata, metadata_json);
      }

      const YAML::Node rl = d["rate_limit"];
      if (rl && !rl.IsNull()) {
        if (!rl.IsMap()) return error(rl, "rate_limit must be a mapping");
        auto rule = load_rule(rl, full_key, shadow, quota, detailed);
        if (!rule) return rule.status();
        (*rule)->metadata_json = std::move(metadata_json);
        node->rule = rule->get();
        set_.rules_.push_back(std::move(*rule));
      }

      const bool wildcard = composite.find('*') != std::string::npos;
      if (node->share_threshold && !wildcard) {
        return error(d, "share_threshold can only be used with wildcard values (containing "
                        "'*'), but found key '" + composite + "'");
      }
      if (node->share_threshold) node->wildcard_pattern = composite;

      const YAML::Node children = d["descriptors"];
      if (Status s = sequence(children, "descriptors"); !s.is_ok()) return s;
      if (Status s = load_descriptors(*node, full_key + ".", children); !s.is_ok()) return s;
      const RuleSet::Node* raw = node.get();
      parent.children.emplace(composite, std::move(node));
      if (wildcard) parent.wildcards.emplace_back(composite, raw);
    }
    return {};
  }

  Result<std::unique_ptr<Rule>> load_rule(const YAML::Node& rl, const std::string& full_key,
                                          bool shadow, bool quota, bool detailed) {
    auto r = std::make_unique<Rule>();
    r->full_key = full_key;
    r->shadow_mode = shadow;
    r->quota_mode = quota;
    r->detailed_metric = detailed;
    r->file = file_;
    r->line = line_of(rl);
    RL_ASSIGN(r->unlimited, boolean(rl["unlimited"], "unlimited"));
    if (const YAML::Node n = rl["requests_per_unit"]; n && !n.IsNull()) {
      int64_t v = 0;
      RL_ASSIGN(v, integer(n, "requests_per_unit", 0, kMaxEveryHitLimit));
      r->requests_per_unit = static_cast<uint32_t>(v);
    }
    std::string unit_text;
    RL_ASSIGN(unit_text, string(rl["unit"], "unit"));
    const std::optional<Unit> unit = parse_unit(unit_text);
    if (r->unlimited) {
      if (unit) return error(rl["unit"], "should not specify rate limit unit when unlimited");
    } else if (!unit) {
      return error(rl["unit"] ? rl["unit"] : rl, "invalid rate limit unit '" + unit_text +
                                                     "' (expected second, minute, hour, day, "
                                                     "week, month or year)");
    }
    r->unit = unit.value_or(Unit::kUnknown);
    RL_ASSIGN(r->name, string(rl["name"], "name"));
    const YAML::Node replaces = rl["replaces"];
    if (Status s = sequence(replaces, "replaces"); !s.is_ok()) return s;
    if (replaces) {
      for (size_t i = 0; i < replaces.size(); ++i) {
        std::string name;
        RL_ASSIGN(name, string(replaces[i]["name"], "replaces.name"));
        r->replaces.push_back(name);
      }
      for (size_t i = 0; i < r->replaces.size(); ++i) {
        if (r->replaces[i].empty()) {
          return error(replaces[i], "should not have an empty replaces entry");
        }
        if (r->replaces[i] == r->name) {
          return error(replaces[i], "replaces should not contain name of same descriptor");
        }
      }
    }

    // Our extension: the algorithm that decides, with its parameters.
    const YAML::Node alg = rl["algorithm"];
    if ((rl["burst"] || rl["mode"]) && !alg) {
      return error(rl["burst"] ? rl["burst"] : rl["mode"],
                   "'burst' and 'mode' need 'algorithm' (token_bucket or leaky_bucket)");
    }
    if (r->unlimited) {
      if (alg) return error(alg, "an unlimited rate_limit takes no algorithm");
      return r;
    }
    const int64_t window_us = unit_seconds(r->unit) * 1'000'000;
    const int64_t rpu = r->requests_per_unit;
    Result<Policy> policy = Status::internal("unset");
    if (!alg) {
      policy = envoy_counter(rpu, r->unit);
      if (!policy) return error(rl, "rate_limit: " + policy.status().message());
      r->policy = *policy;
      return r;
    } else {
      std::string alg_name;
      RL_ASSIGN(alg_name, string(alg, "algorithm"));
      auto a = parse_algorithm(alg_name);
      if (!a) {
        // The rate algorithms only: concurrency is refused below with its own reason.
        return error(alg, "unknown algorithm '" + alg_name + "' (expected fixed_window, sliding_window_log, "
                          "sliding_window_counter, token_bucket or leaky_bucket)");
      }
      if (*a == Algorithm::kConcurrency) {
        // Envoy's rate limit service has no release: a lease taken by ShouldRateLimit could only
        // expire (docs/throttling.md says what works there instead).
        return error(alg, "the concurrency algorithm is not available to the Envoy rate limit "
                          "service: RLS calls cannot release a lease (see docs/throttling.md)");
      }
      const bool bucket = *a == Algorithm::kTokenBucket || *a == Algorithm::kLeakyBucket;
      if (!bucket && (rl["burst"] || rl["mode"])) {
        return error(rl["burst"] ? rl["burst"] : rl["mode"],
                     "'burst' and 'mode' apply to token_bucket and leaky_bucket only");
      }
      if (*a != Algorithm::kLeakyBucket && rl["mode"]) {
        return error(rl["mode"], "'mode' applies to leaky_bucket only");
      }
      const double rate = static_cast<double>(rpu) / static_cast<double>(unit_seconds(r->unit));
      int64_t burst = rpu;
      if (const YAML::Node b = rl["burst"]) RL_ASSIGN(burst, integer(b, "burst", 1, kMaxLimit));
      switch (*a) {
        case Algorithm::kFixedWindow: policy = Policy::fixed_window(rpu, Micros{window_us}); break;
        case Algorithm::kSlidingWindowLog:
          policy = Policy::sliding_window_log(rpu, Micros{window_us});
          break;
        case Algorithm::kSlidingWindowCounter:
          policy = Policy::sliding_window_counter(rpu, Micros{window_us});
          break;
        case Algorithm::kTokenBucket: policy = Policy::token_bucket(rate, burst); break;
        case Algorithm::kLeakyBucket: {
          LeakyMode mode = LeakyMode::kPolice;
          if (const YAML::Node m = rl["mode"]) {
            std::string ms;
            RL_ASSIGN(ms, string(m, "mode"));
            if (ms == "shape") mode = LeakyMode::kShape;
            else if (ms != "police") return error(m, "mode must be police or shape, got '" + ms + "'");
          }
          policy = Policy::leaky_bucket(rate, burst, mode);
          break;
        }
        case Algorithm::kConcurrency: break;  // refused above
      }
    }
    if (!policy) return error(rl, "rate_limit: " + policy.status().message());
    auto named = policy->with_name("rls:" + policy->name());
    r->policy = named ? *named : *policy;
    return r;
  }

  RuleSet& set_;
  const LoadOptions& options_;
  std::string file_;
  std::string domain_;
};

Result<std::shared_ptr<const RuleSet>> RuleSet::load(std::span<const SourceFile> files,
                                                     const LoadOptions& options) {
  std::shared_ptr<RuleSet> set(new RuleSet());
  set->cache_key_prefix_ = options.cache_key_prefix;
  Loader loader(*set, options);
  for (const SourceFile& f : files) {
    if (Status s = loader.load_file(f); !s.is_ok()) return s;
  }
  return std::shared_ptr<const RuleSet>(std::move(set));
}

bool RuleSet::has_domain(std::string_view domain) const {
  return domains_.count(std::string(domain)) != 0;
}

bool RuleSet::all_or_nothing(std::string_view domain) const {
  const auto it = domains_.find(std::string(domain));
  return it != domains_.end() && it->second->all_or_nothing.value_or(false);
}

std::string RuleSet::dump() const {
  std::string out;
  for (const auto& r : rules_) {
    out += r->full_key;
    out += ": unit=";
    out += unit_name(r->unit);
    out += " requests_per_unit=" + std::to_string(r->requests_per_unit);
    out += r->shadow_mode ? ", shadow_mode: true" : ", shadow_mode: false";
    out += r->quota_mode ? ", quota_mode: true" : ", quota_mode: false";
    if (r->unlimited) out += ", unlimited: true";
    if (r->policy && !r->policy->counts_every_hit()) {
      out += ", algorithm: ";
      out += algorithm_name(r->policy->algorithm());
    }
    out += '\n';
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Matching

namespace {

std::string descriptor_key(std::string_view domain, std::span<const Entry> entries) {
  std::string k;
  for (const Entry& e : entries) {
    if (!k.empty()) k += '.';
    k += e.key;
    if (!e.value.empty()) {
      k += '_';
      k += e.value;
    }
  }
  return std::string(domain) + "." + k;
}

}  // namespace

Status RuleSet::resolve(std::string_view domain, std::span<const Descriptor> descriptors,
                        std::vector<Applied>& out) const {
  out.clear();
  out.resize(descriptors.size());
  auto dit = domains_.find(std::string(domain));
  if (dit == domains_.end()) return {};
  const Node* root = dit->second.get();

  std::string final_key;
  for (size_t di = 0; di < descriptors.size(); ++di) {
    const Descriptor& desc = descriptors[di];
    Applied& a = out[di];
    std::vector<std::string> share(desc.entries.size());
    bool any_share = false;

    if (desc.limit) {
      const std::optional<Unit> unit = unit_from_wire(desc.limit->unit);
      if (!unit) {
        return Status::invalid_argument("descriptor " + std::to_string(di) +
                                        ": limit override has unit " +
                                        std::to_string(desc.limit->unit) +
                                        " (expected SECOND=1 ... YEAR=6, WEEK=7)");
      }
      Rule r;
      r.requests_per_unit = desc.limit->requests_per_unit;
      r.unit = *unit;
      r.full_key = descriptor_key(domain, desc.entries);
      auto p = envoy_counter(r.requests_per_unit, *unit);
      if (!p) return p.status();
      r.policy = *p;
      a.stats_key = r.full_key;
      a.override_rule = std::move(r);
    } else {
      const Node* level = root;
      const Rule* found = nullptr;
      std::string detailed_key(domain), vtm_key(domain);
      for (size_t i = 0; i < desc.entries.size(); ++i) {
        const Entry& e = desc.entries[i];
        final_key.assign(e.key);
        final_key += '_';
        final_key += e.value;
        detailed_key += '.';
        detailed_key += final_key;

        const Node* next = nullptr;
        std::string_view matched_wildcard;
        if (auto it = level->children.find(final_key); it != level->children.end()) {
          next = it->second.get();
        }
        if (!next) {
          for (const auto& [pattern, node] : level->wildcards) {
            if (wildcard_match(pattern, final_key)) {
              next = node;
              matched_wildcard = pattern;
              break;
            }
          }
        }
        const bool matched_using_value = next != nullptr;
        if (!next) {
          if (auto it = level->children.find(std::string(e.key)); it != level->children.end()) {
            next = it->second.get();
          }
        }
        const std::string key_prefix = std::string(e.key) + "_";
        auto trim = [&](std::string_view s) {
          return s.starts_with(key_prefix) ? s.substr(key_prefix.size()) : s;
        };
        if (!matched_wildcard.empty() && next && next->share_threshold &&
            !next->wildcard_pattern.empty()) {
          share[i] = std::string(trim(next->wildcard_pattern));
          any_share = true;
        }

        vtm_key += '.';
        vtm_key += e.key;
        if (next) {
          std::string_view use;
          if (!matched_wildcard.empty()) {
            if (!share[i].empty()) use = share[i];
            else if (next->value_to_metric) use = e.value;
            else use = trim(matched_wildcard);
          } else if (matched_using_value) {
            use = e.value;
          } else if (next->value_to_metric) {
            use = e.value;
          }
          if (!use.empty()) {
            vtm_key += '_';
            vtm_key += use;
          }
        }

        if (next && next->rule && i + 1 == desc.entries.size()) found = next->rule;
        if (!next || next->children.empty()) break;
        level = next;
      }
      if (found) {
        a.configured = found;
        if (found->detailed_metric) {
          a.detailed = true;
          if (any_share) {
            std::string k(domain);
            for (size_t i = 0; i < desc.entries.size(); ++i) {
              const Entry& e = desc.entries[i];
              k += '.';
              k += e.key;
              if (!share[i].empty()) {
                k += '_';
                k += share[i];
              } else if (!e.value.empty()) {
                k += '_';
                k += e.value;
              }
            }
            a.stats_key = std::move(k);
          } else {
            a.stats_key = std::move(detailed_key);
          }
        } else {
          a.stats_key = vtm_key != found->full_key ? std::move(vtm_key) : found->full_key;
        }
      }
    }

    const Rule* rule = a.rule();
    if (!rule) continue;
    if (rule->unlimited) continue;  // cache key unused
    std::string& ck = a.cache_key;
    ck = cache_key_prefix_;
    ck += domain;
    ck += '_';
    for (size_t i = 0; i < desc.entries.size(); ++i) {
      ck += desc.entries[i].key;
      ck += '_';
      if (any_share && !share[i].empty()) ck += share[i];
      else ck += desc.entries[i].value;
      ck += '_';
    }
    if (ck.size() > kMaxKeyLength) {
      return Status::invalid_argument("descriptor " + std::to_string(di) + ": its cache key is " +
                                      std::to_string(ck.size()) + " bytes, more than " +
                                      std::to_string(kMaxKeyLength));
    }
  }

  // Unlimited rules answer OK and count nothing; replaced rules act as no match.
  std::unordered_set<std::string_view> replaced;
  for (const Applied& a : out) {
    if (const Rule* r = a.rule()) {
      for (const std::string& name : r->replaces) replaced.insert(name);
    }
  }
  for (Applied& a : out) {
    const Rule* r = a.rule();
    if (!r) continue;
    if (r->unlimited) {
      a.unlimited = true;
      a.configured = nullptr;
      a.cache_key.clear();
      continue;
    }
    if (!r->name.empty() && replaced.count(r->name)) {
      a.configured = nullptr;
      a.override_rule.reset();
      a.cache_key.clear();
      a.stats_key.clear();
    }
  }
  return {};
}

}  // namespace ratelimit::rls
