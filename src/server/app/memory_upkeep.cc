// memory_upkeep.cc — ratelimitd's memory-store metrics, flood warning and snapshots (see
// memory_upkeep.h).
#include "memory_upkeep.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "log.h"

namespace ratelimit::server {

MemoryUpkeep::MemoryUpkeep(std::shared_ptr<MemoryStore> store, const StoreConfig& config)
    : store_(std::move(store)), choice_(config.when_saturated), snapshot_(config.snapshot) {}

namespace {

std::string snapshot_figures(const MemorySnapshotStats& st) {
  return std::to_string(st.keys) + " keys, " + std::to_string(st.policies) + " policies, " +
         std::to_string(st.bytes) + " bytes";
}

}  // namespace

Status MemoryUpkeep::restore() {
  if (!snapshot_) return {};
  const std::string& path = snapshot_->path;
  const auto started = std::chrono::steady_clock::now();
  auto loaded = store_->load(path);
  if (loaded) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    figures_->keys.store(loaded->keys, std::memory_order_relaxed);
    log_line("info", "store.snapshot: read " + path + " in " + std::to_string(ms.count()) + " ms: " +
                         snapshot_figures(*loaded) + " (" + std::to_string(loaded->skipped_idle) +
                         " keys idle by now not restored)");
    return {};
  }
  if (loaded.status().code() == StatusCode::kNotFound) {
    log_line("info", "store.snapshot: no file at " + path + " yet: the store starts empty");
    return {};
  }
  const std::string why = "store.snapshot " + path + ": " + loaded.status().message();
  if (snapshot_->on_corrupt == SnapshotCorrupt::kRefuse) {
    return Status::unavailable(why + " (on_corrupt: refuse; move the file away, or set on_corrupt: "
                                     "start_empty, to start with empty counts)");
  }
  // Moved aside before the first write can replace it: the path may be a typo naming some other
  // file, or a snapshot an operator wants to inspect. If it cannot be moved, nothing is started
  // over it.
  const std::string aside =
      path + ".refused-" +
      std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
  std::error_code ec;
  std::filesystem::rename(path, aside, ec);
  if (ec) {
    return Status::unavailable(why + " (on_corrupt: start_empty, but it cannot be moved aside to " + aside +
                               ": " + ec.message() + "; the start stops rather than overwrite it)");
  }
  log_line("warn", why + " (on_corrupt: start_empty: the store starts empty; the file was moved to " + aside + ")");
  return {};
}

bool MemoryUpkeep::write_snapshot() {
  const auto started = std::chrono::steady_clock::now();
  auto saved = store_->save(snapshot_->path);
  const auto took = std::chrono::steady_clock::now() - started;
  if (!saved) {
    figures_->failures.fetch_add(1, std::memory_order_relaxed);
    log_line("warn", "store.snapshot: writing " + snapshot_->path + " failed: " + saved.status().message() +
                         " (the previous file, if any, is whole; retried at the next interval)");
    return false;
  }
  figures_->last_duration_us.store(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()),
      std::memory_order_relaxed);
  figures_->keys.store(saved->keys, std::memory_order_relaxed);
  figures_->last_success_s.store(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count()),
      std::memory_order_relaxed);
  return true;
}

void MemoryUpkeep::final_snapshot() {
  if (!snapshot_) return;
  if (write_snapshot()) {
    log_line("info", "store.snapshot: wrote " + snapshot_->path + " at shutdown: " +
                         std::to_string(figures_->keys.load(std::memory_order_relaxed)) + " keys");
  }
}

void MemoryUpkeep::add_metrics(Metrics& metrics) const {
  std::weak_ptr<MemoryStore> weak = store_;
  if (snapshot_) {
    metrics.add_extra([f = figures_](std::string& out) {
      append_metric(out, StoreMetric::kMemoryStoreSnapshotLastSuccess, f->last_success_s.load(std::memory_order_relaxed));
      // In seconds, with its fraction (append_metric renders integers only).
      append_metric_header(out, StoreMetric::kMemoryStoreSnapshotLastDuration);
      out += metric_name(StoreMetric::kMemoryStoreSnapshotLastDuration);
      out += ' ';
      out += std::to_string(static_cast<double>(f->last_duration_us.load(std::memory_order_relaxed)) / 1e6);
      out += '\n';
      append_metric(out, StoreMetric::kMemoryStoreSnapshotKeys, f->keys.load(std::memory_order_relaxed));
      append_metric(out, StoreMetric::kMemoryStoreSnapshotFailuresTotal, f->failures.load(std::memory_order_relaxed));
    });
  }
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
  if (snapshot_ && snapshot_->interval.count() > 0) {
    if (next_write_ == std::chrono::steady_clock::time_point{}) {
      next_write_ = now + std::chrono::microseconds(snapshot_->interval.count());
    } else if (now >= next_write_) {
      write_snapshot();
      // From the end of this write: a write that ran long never queues the next one at once.
      next_write_ = std::chrono::steady_clock::now() + std::chrono::microseconds(snapshot_->interval.count());
    }
  }
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
