// rule_set.cc — what a loaded RuleSet answers besides matching (see rule_set.h): units,
// wildcard and stat names, the per-rule hit statistics, the queries and the dump. Matching
// (resolve) is rule_set_match.cc; loading is rule_set_load.cc.
#include "rule_set.h"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "ratelimit/store.h"
#include "rule_set_detail.h"

namespace ratelimit::rls {

namespace rule_set_detail {

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

}  // namespace rule_set_detail

using rule_set_detail::envoy_counter;

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

std::string stat_name(std::string_view key, std::string_view domain) {
  std::string s = sanitize_stat_name(key);
  if (s.size() > domain.size() && std::string_view(s).starts_with(domain) && s[domain.size()] == '.') {
    s.erase(0, domain.size() + 1);
  }
  return s;
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
    if (r->policy && r->policy->consistency().mode != Consistency::kExact) {
      out += ", consistency: ";
      out += consistency_name(r->policy->consistency().mode);
    }
    out += '\n';
  }
  return out;
}

}  // namespace ratelimit::rls
