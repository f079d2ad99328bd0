// published.h — the configuration every part of a running ratelimitd reads: the daemon's Config
// (limits, forward-auth, admin, rendering), the decision service's rules built from it, and
// Envoy's API's descriptor rules, published together in one SnapshotCell by the composition root
// (app.h) at start and on each successful reload.
//
// Why one cell: a reload is one swap, so a request never mixes two configurations, whichever
// API or transport reads it (the transports read only Config::limits, through PublishedLimits;
// Envoy's API reads `envoy` through a SnapshotView of this cell).
// Invariants: a published value never changes; `config` and `rules` are never null; `envoy` is
// null exactly when the daemon serves no Envoy API.
// Thread-safety: read from any thread through a per-thread or per-exchange Cache (snapshot.h).
#pragma once

#include <memory>

#include "config.h"
#include "transport_host.h"
#include "metrics.h"
#include "rls_service.h"
#include "snapshot.h"

namespace ratelimit::server {

struct Published {
  std::shared_ptr<const Config> config;
  std::shared_ptr<const service::Snapshot> rules;
  std::shared_ptr<const rls::RateLimitService::Snapshot> envoy;
};

using ConfigCell = service::SnapshotCell<Published>;

// The transport's view of the cell (transport/transport_host.h): Config::limits of the published value,
// with the cell's per-thread cache. Must not outlive the cell.
class PublishedLimits final : public LimitsSource {
 public:
  explicit PublishedLimits(const ConfigCell& cell) : cell_(cell) {}
  const ConnectionLimits& get(Cache& cache) const override;

 private:
  const ConfigCell& cell_;
};

// The decision service's rules for `config`'s policies, counted in `metrics`.
std::shared_ptr<const service::Snapshot> build_rules(const Config& config, Metrics& metrics);
// `config` with its rules and Envoy's API's (`envoy`, null without one), ready to publish.
std::shared_ptr<const Published> make_published(std::shared_ptr<const Config> config, Metrics& metrics,
                                                std::shared_ptr<const rls::RateLimitService::Snapshot> envoy);

}  // namespace ratelimit::server
