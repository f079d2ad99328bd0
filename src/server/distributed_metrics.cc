// distributed_metrics.cc — DistributedStore's counters as Prometheus metrics (see
// distributed_metrics.h; what each counts: include/ratelimit/distributed_store.h).
#include "distributed_metrics.h"

#include <string>

namespace ratelimit::server {

void add_distributed_metrics(const std::shared_ptr<DistributedStore>& store, Metrics& metrics) {
  std::weak_ptr<DistributedStore> weak = store;
  metrics.add_extra([weak](std::string& out) {
    auto s = weak.lock();
    if (!s) return;
    const DistributedCounters c = s->counters();
    append_metric(out, "ratelimitd_distributed_local_decisions_total", "counter",
                  "Decisions of lease/async policies answered without a store call.", c.local_decisions);
    append_metric(out, "ratelimitd_distributed_exact_passthrough_total", "counter",
                  "Lease/async decisions made exactly because the key table was full or the policy was being redefined.",
                  c.exact_passthrough);
    append_metric(out, "ratelimitd_distributed_failed_open_total", "counter",
                  "Lease/async decisions admitted by the failure policy (the store could not answer).", c.failed_open);
    append_metric(out, "ratelimitd_distributed_failed_closed_total", "counter",
                  "Lease/async decisions denied by the failure policy (the store could not answer).", c.failed_closed);
    append_metric(out, "ratelimitd_lease_reserves_total", "counter",
                  "Reserve calls sent (each also gives back the previous slice's unused units).", c.lease_reserves);
    append_metric(out, "ratelimitd_lease_reserve_failures_total", "counter", "Reserve calls that failed.",
                  c.lease_reserve_failures);
    append_metric(out, "ratelimitd_lease_units_granted_total", "counter", "Units reserved in slices.",
                  c.lease_units_granted);
    append_metric(out, "ratelimitd_lease_units_returned_total", "counter",
                  "Unused units given back to the store (acknowledged).", c.lease_units_returned);
    append_metric(out, "ratelimitd_lease_units_held", "gauge",
                  "Units held in live slices and not yet spent (under-admission if never used).", c.lease_units_held);
    append_metric(out, "ratelimitd_async_pushes_total", "counter", "Pushes (and reads) sent to the store.",
                  c.async_pushes);
    append_metric(out, "ratelimitd_async_push_failures_total", "counter",
                  "Pushes that failed; their hits are kept and sent with the next push.", c.async_push_failures);
    append_metric(out, "ratelimitd_async_units_pushed_total", "counter", "Hits acknowledged by the store.",
                  c.async_units_pushed);
    append_metric(out, "ratelimitd_async_units_pending", "gauge",
                  "Hits admitted here and not yet acknowledged by the store.", c.async_units_pending);
    append_metric(out, "ratelimitd_async_units_over_limit_total", "counter",
                  "Pushed hits the shared count had no room for: units admitted past the limit (this instance's share).",
                  c.async_units_over_limit);
    // In seconds, with its fraction (append_metric renders integers only).
    out += "# HELP ratelimitd_async_view_age_seconds Age of the oldest view of the global count among the keys held.\n"
           "# TYPE ratelimitd_async_view_age_seconds gauge\nratelimitd_async_view_age_seconds ";
    out += std::to_string(static_cast<double>(c.async_view_age_us) / 1e6);
    out += "\n";
    append_metric(out, "ratelimitd_distributed_keys", "gauge", "(policy, key) pairs held by the lease/async modes.",
                  c.keys);
  });
}

}  // namespace ratelimit::server
