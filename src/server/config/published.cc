// published.cc — building a publishable configuration (see published.h).
#include "published.h"

namespace ratelimit::server {

std::shared_ptr<const service::Snapshot> build_rules(const Config& config, Metrics& metrics) {
  auto rules = std::make_shared<service::Snapshot>();
  for (const auto& [name, pc] : config.policies) {
    auto it = rules->rules.emplace(name, service::Rule{pc.policy, pc.shadow, metrics.policy(name),
                                                 pc.request_limit_min, pc.request_limit_max,
                                                 pc.max_wait, pc.max_queue, pc.hold_delay}).first;
    it->second.classes = pc.classes;
    for (const auto& c : pc.classes) {
      // Valid: the config checked class_limit >= 1 against this fixed limit.
      it->second.class_policies.push_back(*pc.policy.with_limit(algo::class_limit(pc.policy.limit(), c.headroom)));
    }
  }
  return rules;
}

const ConnectionLimits& PublishedLimits::get(Cache& cache) const {
  if (cache.limits != nullptr && cache.generation == cell_.generation()) return *cache.limits;
  ConfigCell::Cache read;  // the cell's locked read, only when a newer value was published
  const Published& p = cell_.get(read);
  cache.limits = &p.config->limits;
  cache.generation = read.generation;
  cache.hold = std::move(read.value);
  return *cache.limits;
}

std::shared_ptr<const Published> make_published(std::shared_ptr<const Config> config, Metrics& metrics,
                                                std::shared_ptr<const rls::RateLimitService::Snapshot> envoy) {
  auto rules = build_rules(*config, metrics);
  return std::make_shared<const Published>(Published{std::move(config), std::move(rules), std::move(envoy)});
}

}  // namespace ratelimit::server
