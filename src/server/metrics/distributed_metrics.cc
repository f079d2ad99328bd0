// distributed_metrics.cc — DistributedStore's counters as Prometheus metrics (see
// distributed_metrics.h; what each counts: include/ratelimit/distributed_store.h). Names, types
// and help texts are declared with every other family in metric_families.h's table.
#include "distributed_metrics.h"

#include <string>
#include <vector>

namespace ratelimit::server {

void add_distributed_metrics(const std::shared_ptr<DistributedStore>& store, Metrics& metrics) {
  std::weak_ptr<DistributedStore> weak = store;
  metrics.add_extra([weak](std::string& out) {
    auto s = weak.lock();
    if (!s) return;
    const DistributedCounters c = s->counters();
    append_metric(out, StoreMetric::kDistributedLocalDecisionsTotal, c.local_decisions);
    append_metric(out, StoreMetric::kDistributedExactPassthroughTotal, c.exact_passthrough);
    append_metric(out, StoreMetric::kDistributedFailedOpenTotal, c.failed_open);
    append_metric(out, StoreMetric::kDistributedFailedClosedTotal, c.failed_closed);
    append_metric(out, StoreMetric::kDistributedKeys, c.keys);
    append_metric(out, StoreMetric::kLeaseReservesTotal, c.lease_reserves);
    append_metric(out, StoreMetric::kLeaseReserveFailuresTotal, c.lease_reserve_failures);
    append_metric(out, StoreMetric::kLeaseUnitsGrantedTotal, c.lease_units_granted);
    append_metric(out, StoreMetric::kLeaseUnitsReturnedTotal, c.lease_units_returned);
    append_metric(out, StoreMetric::kLeaseUnitsHeld, c.lease_units_held);
    append_metric(out, StoreMetric::kAsyncPushesTotal, c.async_pushes);
    append_metric(out, StoreMetric::kAsyncPushFailuresTotal, c.async_push_failures);
    append_metric(out, StoreMetric::kAsyncUnitsPushedTotal, c.async_units_pushed);
    append_metric(out, StoreMetric::kAsyncUnitsPending, c.async_units_pending);
    append_metric(out, StoreMetric::kAsyncUnitsOverLimitTotal, c.async_units_over_limit);
    // In seconds, with its fraction (append_metric renders integers only).
    append_metric_header(out, StoreMetric::kAsyncViewAgeSeconds);
    out += metric_name(StoreMetric::kAsyncViewAgeSeconds);
    out += ' ';
    out += std::to_string(static_cast<double>(c.async_view_age_us) / 1e6);
    out += '\n';
  });
}

namespace {

// One family with a sample per region: `value` renders the number.
template <typename F>
void per_region(std::string& out, StoreMetric m, const std::vector<RegionStatus>& regions, F value) {
  append_metric_header(out, m);
  for (const RegionStatus& r : regions) {
    out += metric_name(m);
    out += "{region=\"";
    out += r.name;  // validated at load: [a-z0-9_-]
    out += "\"} ";
    out += value(r);
    out += '\n';
  }
}

}  // namespace

void add_region_metrics(const std::shared_ptr<RegionStore>& store, Metrics& metrics) {
  std::weak_ptr<RegionStore> weak = store;
  metrics.add_extra([weak](std::string& out) {
    auto s = weak.lock();
    if (!s) return;
    const std::vector<RegionStatus> regions = s->regions();
    per_region(out, StoreMetric::kRegionReachable, regions,
               [](const RegionStatus& r) { return std::string(r.reachable ? "1" : "0"); });
    per_region(out, StoreMetric::kRegionViewAgeSeconds, regions, [](const RegionStatus& r) {
      return r.view_age_us < 0 ? std::string("-1") : std::to_string(static_cast<double>(r.view_age_us) / 1e6);
    });
    per_region(out, StoreMetric::kRegionReadsTotal, regions,
               [](const RegionStatus& r) { return std::to_string(r.reads); });
    per_region(out, StoreMetric::kRegionReadFailuresTotal, regions,
               [](const RegionStatus& r) { return std::to_string(r.read_failures); });
    const RegionCounters c = s->counters();
    append_metric(out, StoreMetric::kRegionDecisionsTotal, c.decisions);
    append_metric(out, StoreMetric::kRegionCappedTotal, c.capped);
    append_metric(out, StoreMetric::kRegionDeniedByOthersTotal, c.denied_by_others);
    append_metric(out, StoreMetric::kRegionUntrackedTotal, c.untracked);
    append_metric(out, StoreMetric::kRegionKeys, c.keys);
  });
}

}  // namespace ratelimit::server
