// shared_fields.h — one field per process in a hash that several processes share through the
// store: each writes its own field (stamped with the store's clock and given an end) and reads
// everyone's in the same atomic call. RLQS uses it to exchange each instance's clients' demands
// per bucket (src/rlqs/quota_sync.h), so replicas behind one Redis divide one limit.
//
// Why an interface of its own: this is not a decision (Store) nor a count (SharedCounts), and
// only a store shared by several processes has a reason to offer it; RedisStore implements it.
// Times are the store's clock (Redis TIME, milliseconds), so the processes' clocks never need to
// agree: a reader compares a field's stamps with `now_ms` of the same reply.
// Contract: the completion runs exactly once, on a thread of the store's choosing (inline for
// invalid input), and must not block on the store. Errors: kInvalidArgument (empty or too long
// key or field, a ttl below 1 ms), kUnavailable / kDeadlineExceeded when the store cannot answer.
// Thread-safety: any method from any thread, concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit {

struct SharedField {
  std::string name;
  int64_t written_ms = 0;  // the store's clock when its writer last wrote it
  int64_t ends_ms = 0;     // written_ms + the writer's ttl: dropped by the store after it
  std::string value;
};

struct SharedFieldsView {
  int64_t now_ms = 0;  // the store's clock during the call
  std::vector<SharedField> fields;  // every field whose end has not passed, the caller's too
};

using SharedFieldsCallback = std::function<void(Result<SharedFieldsView>)>;

class SharedFields {
 public:
  virtual ~SharedFields() = default;
  // Sets `field` of the hash `key` to `value` (empty: deletes the field) with an end `ttl_ms`
  // from now, drops every field whose end has passed, keeps the hash alive at least ttl_ms, and
  // answers the fields left — one atomic call.
  virtual void exchange_field_async(std::string_view key, std::string_view field, std::string_view value,
                                    int64_t ttl_ms, SharedFieldsCallback done) = 0;
};

}  // namespace ratelimit
