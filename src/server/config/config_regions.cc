// config_regions.cc — `region`, `regions` and each policy's `scope` (schema and why in
// config_regions.h). Validated precisely: an unknown or missing region, a region named twice, a
// region without its Redis, a sync_interval out of range, shares that do not fit, a store that
// names its own URL, a policy that cannot be counted across regions — each refused with the
// file, the line and the reason; `c` is the caller's Config under construction, discarded on
// any error, so nothing half-applies.
#include "config_regions.h"

#include <string>

#include "ratelimit/redis_store.h"

namespace ratelimit::server {
namespace {

using config_detail::Parser;

bool valid_region_name(const std::string& n) {
  if (n.empty() || n.size() > 32) return false;
  for (char ch : n) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')) return false;
  }
  return true;
}

std::string names(const RegionsConfig& r) {
  std::string out;
  for (const RegionConfig& s : r.stores) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

Status parse_stores(const Parser& p, const YAML::Node& n, RegionsConfig& out) {
  if (!n.IsMap()) return p.error(n, "regions.stores must be a mapping of region name -> { redis: URL }");
  int with_share = 0;
  double shares = 0;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return p.error(it->first, "regions.stores: region names must be plain names");
    RegionConfig r;
    r.name = it->first.Scalar();
    if (!valid_region_name(r.name)) {
      return p.error(it->first, "regions.stores: region name '" + r.name +
                                    "' must be 1 to 32 characters of a-z, 0-9, '-' and '_'");
    }
    for (const RegionConfig& other : out.stores) {
      if (other.name == r.name) return p.error(it->first, "regions.stores: region '" + r.name + "' given twice");
    }
    const std::string what = "regions.stores." + r.name;
    const YAML::Node& v = it->second;
    RL_TRY(p.check_map(v, what, {"redis", "share"}));
    if (!v["redis"]) return p.error(v, what + ": 'redis' is required (that region's Redis URL)");
    RL_TRY_ASSIGN(r.redis, p.string(v["redis"], what + ".redis"));
    if (auto u = parse_redis_url(r.redis); !u.ok()) {
      return p.error(v["redis"], what + ".redis: " + u.status().message());
    }
    if (v["share"]) {
      RL_TRY_ASSIGN(r.share, p.number(v["share"], what + ".share"));
      if (!(r.share > 0 && r.share <= 1)) return p.error(v["share"], what + ".share must be in (0, 1]");
      ++with_share;
      shares += r.share;
    }
    out.stores.push_back(std::move(r));
  }
  if (out.stores.size() < 2) {
    return p.error(n, "regions.stores needs at least two regions (one region is a plain store: use store.url)");
  }
  if (with_share != 0 && with_share != static_cast<int>(out.stores.size())) {
    return p.error(n, "regions.stores: give 'share' to every region or to none (none: each gets 1 / regions)");
  }
  if (shares > 1 + 1e-9) {
    return p.error(n, "regions.stores: the shares add up to " + std::to_string(shares) +
                          ", more than 1 (capped regions could then admit past the limit together)");
  }
  return {};
}

// scope: global | region on every policy; global is the default with regions.
Status apply_scopes(const Parser& p, const YAML::Node& root, Config& c) {
  const YAML::Node pols = root["policies"];
  for (auto it = pols.begin(); pols && it != pols.end(); ++it) {
    const std::string name = it->first.Scalar();
    const YAML::Node scope = it->second["scope"];
    const std::string what = "policy '" + name + "'";
    bool global = c.regions.has_value();
    if (scope) {
      if (!c.regions) return p.error(scope, what + ".scope applies only with 'regions' (several regions, each its own store)");
      std::string s;
      RL_TRY_ASSIGN(s, p.string(scope, what + ".scope"));
      if (s == "global") {
        global = true;
      } else if (s == "region") {
        global = false;
      } else {
        return p.error(scope, what + ".scope must be global (counted across regions) or region (each region "
                                     "limits on its own), got '" + s + "'");
      }
    }
    auto pc = c.policies.find(name);
    if (pc == c.policies.end() || !global) continue;
    ConsistencyOptions o = pc->second.policy.consistency();
    o.across_regions = true;
    auto with = pc->second.policy.with_consistency(o);
    if (!with) return p.error(scope ? scope : it->first, what + ": " + with.status().message());
    pc->second.policy = *std::move(with);
  }
  return {};
}

}  // namespace

Status parse_regions(const Parser& p, const YAML::Node& root, Config& c) {
  const YAML::Node region = root["region"];
  const YAML::Node regions = root["regions"];
  if (region && !regions) {
    return p.error(region, "region: names this ratelimitd's region among 'regions', which is missing");
  }
  if (!regions) return apply_scopes(p, root, c);
  RegionsConfig r;
  RL_TRY(p.check_map(regions, "regions", {"sync_interval", "partition_share", "stores"}));
  if (regions["sync_interval"]) {
    RL_TRY_ASSIGN(r.sync_interval, p.duration(regions["sync_interval"], "regions.sync_interval"));
    if (r.sync_interval < kMinSyncInterval || r.sync_interval > kMaxSyncInterval) {
      return p.error(regions["sync_interval"], "regions.sync_interval must be between 1ms and 1m");
    }
  }
  if (regions["partition_share"]) {
    RL_TRY_ASSIGN(r.partition_share, p.boolean(regions["partition_share"], "regions.partition_share"));
  }
  if (!regions["stores"]) return p.error(regions, "regions: 'stores' is required (region name -> { redis: URL })");
  RL_TRY(parse_stores(p, regions["stores"], r));
  if (!region) return p.error(regions, "regions: set 'region' (this ratelimitd's region, one of: " + names(r) + ")");
  RL_TRY_ASSIGN(r.self, p.string(region, "region"));
  const RegionConfig* self = nullptr;
  for (const RegionConfig& s : r.stores) {
    if (s.name == r.self) self = &s;
  }
  if (self == nullptr) {
    return p.error(region, "region '" + r.self + "' is not one of regions.stores (" + names(r) + ")");
  }
  const YAML::Node store = root["store"];
  if (store && store["type"] && store["type"].IsScalar() && store["type"].Scalar() != "redis") {
    return p.error(store["type"], "regions: each region decides on its own Redis; store.type must be redis (or absent)");
  }
  if (store && store["url"]) {
    return p.error(store["url"], "store.url: with regions, this region's Redis is regions.stores." + r.self +
                                     ".redis (give it once)");
  }
  if (c.store.denial_cache.enabled) {
    return p.error(store["denial_cache"], "store.denial_cache is not combined with regions yet (a denial "
                                          "cached on one region's view would outlive a heal)");
  }
  c.store.type = StoreType::kRedis;
  c.store.url = self->redis;
  c.regions = std::move(r);
  return apply_scopes(p, root, c);
}

}  // namespace ratelimit::server
