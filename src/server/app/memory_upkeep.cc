// memory_upkeep.cc — ratelimitd's memory-store metrics and flood warning (see memory_upkeep.h).
#include "memory_upkeep.h"

#include <utility>

namespace ratelimit::server {

MemoryUpkeep::MemoryUpkeep(std::shared_ptr<MemoryStore> store, const StoreConfig& config)
    : store_(std::move(store)), choice_(config.when_saturated) {}

void MemoryUpkeep::add_metrics(Metrics& metrics) const {
  std::weak_ptr<MemoryStore> weak = store_;
  metrics.add_extra([weak](std::string& out) {
    auto s = weak.lock();
    if (!s) return;
    append_metric(out, StoreMetric::kMemoryStoreKeys, s->key_count());
    append_metric(out, StoreMetric::kMemoryStoreBytes, s->bytes());
    const MemoryStoreEvictions e = s->eviction_counts();
    append_metric(out, StoreMetric::kMemoryStoreEvictionsTotal, e.total());
    append_metric_header(out, StoreMetric::kMemoryStoreEvictionsByStandingTotal);
    for (const auto& [standing, n] : {std::pair{"roomy", e.roomy}, std::pair{"near_limit", e.near_limit},
                                      std::pair{"denied", e.denied}}) {
      out += metric_name(StoreMetric::kMemoryStoreEvictionsByStandingTotal);
      out += "{standing=\"";
      out += standing;
      out += "\"} " + std::to_string(n) + "\n";
    }
    append_metric(out, StoreMetric::kMemoryStoreEvictionsForBytesTotal, e.for_bytes);
    append_metric(out, StoreMetric::kMemoryStoreResidueSaturatedTotal, e.residue_saturated);
    append_metric(out, StoreMetric::kMemoryStoreResidueDroppedTotal, e.residue_dropped);
  });
}

std::optional<std::string> MemoryUpkeep::tick(std::chrono::steady_clock::time_point now) {
  const MemoryStoreEvictions e = store_->eviction_counts();
  const uint64_t saturated = e.residue_saturated - saturated_;
  const uint64_t dropped = e.residue_dropped - dropped_;
  if (saturated + dropped == 0) return std::nullopt;
  if (last_line_ && now - *last_line_ < std::chrono::minutes(1)) return std::nullopt;
  last_line_ = now;
  saturated_ = e.residue_saturated;
  dropped_ = e.residue_dropped;
  std::string line = "memory store: a key flood saturated the eviction residue (keys evicted at their limit "
                     "beyond what store.max_keys can remember): ";
  if (saturated > 0) {
    line += std::to_string(saturated) + " residues folded into their policy's saturation mark (when_saturated: "
            "refuse): that policy's new keys hashing there are refused until their window ends";
  }
  if (saturated > 0 && dropped > 0) line += "; ";
  if (dropped > 0) {
    line += std::to_string(dropped) + " residues dropped" +
            (choice_ == SaturationChoice::kAdmit ? " (when_saturated: admit)" : "") +
            ": those keys may be admitted their limit again";
  }
  return line + ". Raise store.max_keys, or use the Redis store, if this is not an attack.";
}

}  // namespace ratelimit::server
