// config_regions.h — the `region` and `regions` keys of the native configuration, and each
// policy's `scope`: which region this ratelimitd belongs to, every region's store, how often
// they exchange counts, whether a partition caps each region at its share, and which policies
// are counted across regions (docs/distributed.md, regions).
//
//   region: eu                          # this ratelimitd's region (one of regions.stores)
//   regions:
//     sync_interval: 100ms              # how often each key in use is read from the others
//     partition_share: true             # while a region is unreachable, admit ≤ limit × share
//     stores:
//       eu: { redis: "redis://10.0.0.5:6379/0" }
//       us: { redis: "redis://10.1.0.5:6379/0" }   # optional share: 0.5 (all or none)
//   store: { type: redis, on_failure: open }        # the URL comes from regions.stores.eu
//   policies:
//     api:  { algorithm: fixed_window, limit: 1000, window: 1m }             # scope: global
//     burst: { algorithm: token_bucket, rate: 10, burst: 20, scope: region }  # per region
//
// Why apart from config.cc: one concern, validated as a whole after the policies and the store
// are read (a policy's default scope and the store's URL depend on it). Every refusal names the
// file and line; nothing is applied unless all of it is valid (the Config is built aside).
#pragma once

#include <yaml-cpp/yaml.h>

#include "config.h"
#include "config_parser.h"

namespace ratelimit::server {

// Reads `region`, `regions` and every policy's `scope` from `root` into `c` (c.store and
// c.policies already parsed): sets c.regions, c.store's type and URL (this region's), and each
// policy's consistency().across_regions. Errors: "file:line: reason" (kInvalidArgument).
Status parse_regions(const config_detail::Parser& p, const YAML::Node& root, Config& c);

}  // namespace ratelimit::server
