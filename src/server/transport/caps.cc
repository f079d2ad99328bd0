// caps.cc — connection admission and release (see caps.h).
#include "caps.h"

namespace ratelimit::server {

ConnectionSlot::~ConnectionSlot() {
  if (caps_ != nullptr) caps_->release(address_, admin_);
}

std::optional<ConnectionSlot> ConnectionCaps::admit(std::string address, bool admin) {
  if (admin) {
    if (admin_open_.load(std::memory_order_relaxed) >= kAdminMaxConnections) return std::nullopt;
    admin_open_.fetch_add(1, std::memory_order_relaxed);
    return ConnectionSlot(this, std::move(address), true);
  }
  const ConnectionLimits& limits = limits_.get(cache_);
  if (counters_.open_connections() >= static_cast<int64_t>(limits.max_connections)) {
    counters_.connection_rejected();
    return std::nullopt;
  }
  {
    MutexLock lock(mu_);
    size_t& n = per_client_[address];
    if (limits.max_connections_per_client != 0 && n >= limits.max_connections_per_client) {
      counters_.connection_rejected_per_client();  // n > 0 here: the entry existed
      return std::nullopt;
    }
    ++n;
  }
  counters_.connection_opened();
  return ConnectionSlot(this, std::move(address), false);
}

void ConnectionCaps::release(const std::string& address, bool admin) {
  if (admin) {
    admin_open_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  {
    MutexLock lock(mu_);
    auto it = per_client_.find(address);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
  }
  counters_.connection_closed();
}

}  // namespace ratelimit::server
