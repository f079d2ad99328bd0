// server_info.cc — maxmemory-policy and evicted_keys from INFO (see server_info.h).
#include "server_info.h"

#include <hiredis/hiredis.h>

#include <charconv>

#include "resp.h"

namespace ratelimit::redis_detail {

std::optional<std::string_view> info_field(std::string_view info, std::string_view field) {
  size_t pos = 0;
  while (pos < info.size()) {
    size_t end = info.find('\n', pos);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
    pos = end + 1;
  }
  return std::nullopt;
}

void ServerInfoWatch::record_policy(std::string_view policy) {
  MutexLock lock(mu_);
  // Once a node was seen evicting, a later noeviction (another node, or a poll) does not hide
  // it: that is what an operator must see.
  if (policy != "noeviction" || policy_.empty()) policy_ = std::string(policy);
}

HandshakeStep ServerInfoWatch::policy_step() {
  HandshakeStep step;
  step.command = encode_command(std::vector<std::string>{"INFO", "memory"});
  step.check = [this](const redisReply* r) -> Status {
    if (r == nullptr || (r->type != REDIS_REPLY_STRING)) {
      return Status::unavailable("Redis refused INFO memory: " + reply_text(r));
    }
    const auto policy = info_field(std::string_view(r->str, r->len), "maxmemory_policy");
    if (!policy) return {};  // not Redis-compatible on this point (some proxies): nothing to say
    record_policy(*policy);
    if (*policy == "noeviction") return {};
    unsafe_.fetch_add(1, std::memory_order_relaxed);
    if (require_noeviction_) {
      return Status::invalid_argument(
          "Redis has maxmemory-policy " + std::string(*policy) +
          ", so it may delete rate-limit keys under memory pressure (limits silently reset); "
          "require_noeviction is set: configure maxmemory-policy noeviction");
    }
    return {};
  };
  return step;
}

void ServerInfoWatch::observe(std::string_view info) {
  if (auto policy = info_field(info, "maxmemory_policy")) record_policy(*policy);
  const auto run_id = info_field(info, "run_id");
  const auto text = info_field(info, "evicted_keys");
  if (!run_id || !text) return;
  uint64_t now = 0;
  auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), now);
  if (ec != std::errc()) return;
  MutexLock lock(mu_);
  for (auto& s : servers_) {
    if (s.run_id != *run_id) continue;
    if (now > s.evicted) evicted_.fetch_add(now - s.evicted, std::memory_order_relaxed);
    s.evicted = now;
    return;
  }
  if (servers_.size() == kMaxServers) servers_.erase(servers_.begin());
  servers_.push_back(Seen{std::string(*run_id), now});
}

std::string ServerInfoWatch::eviction_policy() const {
  MutexLock lock(mu_);
  return policy_;
}

}  // namespace ratelimit::redis_detail
