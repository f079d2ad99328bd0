// distributed.cc — the distributed model's facade (see distributed.h): options and their
// validation, one engine per algorithm (distributed_model.h), requests routed to instances.
#include "distributed.h"

#include <algorithm>
#include <unordered_map>

#include "distributed_model.h"

namespace ratelimit::sim {

using model::AlgoSim;

namespace {

Result<Policy> with_mode(const Policy& p, Consistency mode, const DistributedOptions& o) {
  ConsistencyOptions c;
  c.mode = mode;
  c.sync_interval = o.sync_interval;
  c.lease_max = std::min(o.lease_max, p.limit());
  c.lease_ttl = o.slice_ttl;
  return p.with_consistency(c);
}

}  // namespace

Status validate(const DistributedOptions& o) {
  if (o.instances < 1 || o.instances > 1000) return Status::invalid_argument("--instances must be 1 ... 1000");
  if (o.regions < 1 || o.regions > o.instances) {
    return Status::invalid_argument("--regions must be 1 ... --instances (each region runs an instance)");
  }
  if (o.rtt.count() < 0 || o.cross_rtt.count() < 0) {
    return Status::invalid_argument("--rtt and --cross-rtt must not be negative");
  }
  if (o.sync_interval < kMinSyncInterval || o.sync_interval > kMaxSyncInterval) {
    return Status::invalid_argument("--sync-interval must be 1ms ... 1m");
  }
  if (o.slice_ttl < kMinLeaseTtl || o.slice_ttl > kMaxLeaseTtl) {
    return Status::invalid_argument("--slice-ttl must be 1ms ... 1h");
  }
  if (o.lease_max < 0) return Status::invalid_argument("--lease-max must not be negative");
  return {};
}

struct Distributed::Impl {
  DistributedOptions options;
  std::vector<AlgoSim> sims;
  std::unordered_map<std::string, uint32_t> ids;
  int64_t next_instance = 0;
  bool started = false;
};

Distributed::Distributed(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Distributed::Distributed(Distributed&&) noexcept = default;
Distributed& Distributed::operator=(Distributed&&) noexcept = default;
Distributed::~Distributed() = default;

Result<Distributed> Distributed::create(const Policy& fixed, const Policy& counter,
                                        DistributedOptions options) {
  if (auto s = validate(options); !s.is_ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->sims.reserve(2);
  for (const Policy* p : {&fixed, &counter}) {
    auto lease = with_mode(*p, Consistency::kLease, impl->options);
    if (!lease) return lease.status();
    auto async = with_mode(*p, Consistency::kAsync, impl->options);
    if (!async) return async.status();
    impl->sims.emplace_back(*p, *lease, *async, impl->options);
  }
  return Distributed(std::move(impl));
}

void Distributed::add(int64_t t_us, std::string_view key, int64_t cost) {
  Impl& m = *impl_;
  if (!m.started) {
    m.started = true;
    for (AlgoSim& s : m.sims) s.start(t_us);
  }
  auto it = m.ids.find(std::string(key));
  if (it == m.ids.end()) it = m.ids.emplace(std::string(key), static_cast<uint32_t>(m.ids.size())).first;
  const int64_t instance = m.next_instance;
  m.next_instance = (m.next_instance + 1) % m.options.instances;
  for (AlgoSim& s : m.sims) s.add(t_us, it->second, cost, instance);
}

DistributedReport Distributed::finish() {
  DistributedReport out;
  out.options = impl_->options;
  for (AlgoSim& s : impl_->sims) {
    for (DistributedResult& r : s.finish()) out.results.push_back(std::move(r));
  }
  return out;
}

}  // namespace ratelimit::sim
