// cluster_map.cc — parse_cluster_map: the slot map of a Redis Cluster from CLUSTER SHARDS
// (Redis 7+) or CLUSTER SLOTS (before), the master of each slot range (see cluster_router.h).
//
// Why its own file: it is pure (a reply in, ranges or an error out, no I/O, no lock), the part
// of the router a test can feed any reply to, apart from routing and the refresh's timing.
// Invariants: every range lies in 0 ... kSlotCount - 1 with first <= last; an unexpected shape
// is kInternal naming the command, never a crash or a partial map.
#include <hiredis/hiredis.h>

#include "cluster_router.h"
#include "resp.h"

namespace ratelimit::redis_detail {
namespace {

bool is_string(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

// A RESP2 map (flat array of key, value, ...): the value of `key`, or null.
const redisReply* field(const redisReply* map, std::string_view key) {
  if (map == nullptr || map->type != REDIS_REPLY_ARRAY) return nullptr;
  for (size_t i = 0; i + 1 < map->elements; i += 2) {
    if (is_string(map->element[i]) && reply_str(map->element[i]) == key) {
      return map->element[i + 1];
    }
  }
  return nullptr;
}

Status shape_error(const char* what) {
  return Status::internal(std::string("unexpected CLUSTER ") + what + " reply");
}

}  // namespace

Result<std::vector<SlotRange>> parse_cluster_map(const redisReply* reply, bool slots_form) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return shape_error(slots_form ? "SLOTS" : "SHARDS");
  }
  std::vector<SlotRange> out;
  if (slots_form) {
    // [[first, last, [host, port, id, ...] (the master), [replica], ...], ...]
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* e = reply->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
          e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER ||
          e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
          e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
        return shape_error("SLOTS");
      }
      SlotRange r;
      r.first = static_cast<int>(e->element[0]->integer);
      r.last = static_cast<int>(e->element[1]->integer);
      std::string_view host = reply_str(e->element[2]->element[0]);
      r.host = host == "?" ? std::string() : std::string(host);
      r.port = static_cast<uint16_t>(e->element[2]->element[1]->integer);
      out.push_back(std::move(r));
    }
  } else {
    // [{slots: [first, last, ...], nodes: [{id, port, ip, endpoint, role, health, ...}]}, ...]
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* shard = reply->element[i];
      const redisReply* slots = field(shard, "slots");
      const redisReply* nodes = field(shard, "nodes");
      if (slots == nullptr || nodes == nullptr || slots->type != REDIS_REPLY_ARRAY ||
          nodes->type != REDIS_REPLY_ARRAY) {
        return shape_error("SHARDS");
      }
      if (slots->elements == 0) continue;  // a shard without slots (a new or emptied master)
      // The master of the shard; an online one when a failed old master is still listed.
      const redisReply* master = nullptr;
      for (size_t n = 0; n < nodes->elements; ++n) {
        const redisReply* node = nodes->element[n];
        if (reply_str(field(node, "role")) != "master") continue;
        if (master == nullptr || reply_str(field(node, "health")) == "online") master = node;
      }
      if (master == nullptr) continue;
      const redisReply* port = field(master, "port");
      if (port == nullptr || port->type != REDIS_REPLY_INTEGER) return shape_error("SHARDS");
      std::string host(reply_str(field(master, "endpoint")));
      if (host.empty() || host == "?") host = std::string(reply_str(field(master, "ip")));
      if (host == "?") host.clear();
      for (size_t s = 0; s + 1 < slots->elements; s += 2) {
        if (slots->element[s]->type != REDIS_REPLY_INTEGER ||
            slots->element[s + 1]->type != REDIS_REPLY_INTEGER) {
          return shape_error("SHARDS");
        }
        SlotRange r;
        r.first = static_cast<int>(slots->element[s]->integer);
        r.last = static_cast<int>(slots->element[s + 1]->integer);
        r.host = host;
        r.port = static_cast<uint16_t>(port->integer);
        out.push_back(r);
      }
    }
  }
  for (const auto& r : out) {
    if (r.first < 0 || r.last >= kSlotCount || r.first > r.last || r.port == 0) {
      return Status::internal("CLUSTER map with an invalid slot range");
    }
  }
  return out;
}

}  // namespace ratelimit::redis_detail
