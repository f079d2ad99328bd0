// redis_store_fields.cc — RedisStore's shared fields (include/ratelimit/shared_fields.h): one
// process's field in a hash every process reads, stamped with Redis' clock, in one script.
//
// Why its own file and an inline EVAL: it is neither a decision nor a count, and no client of the
// function library needs it (the library is the clients' contract, docs/redis-functions.md);
// envoy_counter.cc sends its one command the same way.
//
// Invariants: `done` is called exactly once; invalid input answers kInvalidArgument before
// anything is sent; a transport or reply failure is counted and answered as an error; the hash's
// key is routed by its own hash slot on a cluster; a field's stored value is
// "<written_ms> <ends_ms> <value>" and the script drops the fields whose end has passed, so
// fields of processes gone never pile up while others keep the hash alive.
#include <hiredis/hiredis.h>

#include <charconv>
#include <vector>

#include "hash_slot.h"
#include "redis_store_impl.h"
#include "resp.h"

namespace ratelimit {
using namespace redis_detail;

namespace {

constexpr size_t kMaxFieldName = 256;

// KEYS[1] the hash, ARGV: field, value ('' deletes), ttl_ms. Returns {now_ms, {name, stored, ...}}.
constexpr std::string_view kExchange = R"(local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d %d ', now, now + ttl) .. ARGV[2])
end
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local ends = tonumber(string.match(all[i + 1], '^%d+ (%d+) '))
  if ends == nil or ends <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
if #out > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {now, out})";

bool parse_int(std::string_view s, int64_t& out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

Result<SharedFieldsView> decode_fields(const redisReply* r) {
  if (r == nullptr) return Status::unavailable("no reply");
  if (r->type == REDIS_REPLY_ERROR) return Status::unavailable("Redis refused the exchange: " + std::string(r->str, r->len));
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
      r->element[1]->type != REDIS_REPLY_ARRAY || r->element[1]->elements % 2 != 0) {
    return Status::unavailable("unexpected reply to the fields exchange");
  }
  SharedFieldsView v;
  v.now_ms = r->element[0]->integer;
  const redisReply* all = r->element[1];
  for (size_t i = 0; i + 1 < all->elements; i += 2) {
    const redisReply* name = all->element[i];
    const redisReply* stored = all->element[i + 1];
    if (name->type != REDIS_REPLY_STRING || stored->type != REDIS_REPLY_STRING) {
      return Status::unavailable("unexpected field in the fields exchange");
    }
    const std::string_view s(stored->str, stored->len);
    const size_t a = s.find(' ');
    const size_t b = a == std::string_view::npos ? a : s.find(' ', a + 1);
    SharedField f;
    if (b == std::string_view::npos || !parse_int(s.substr(0, a), f.written_ms) ||
        !parse_int(s.substr(a + 1, b - a - 1), f.ends_ms)) {
      continue;  // not written by this code: not ours to read (the script drops it next time)
    }
    f.name.assign(name->str, name->len);
    f.value.assign(s.substr(b + 1));
    v.fields.push_back(std::move(f));
  }
  return v;
}

}  // namespace

void RedisStore::exchange_field_async(std::string_view key, std::string_view field, std::string_view value,
                                      int64_t ttl_ms, SharedFieldsCallback done) {
  if (Status s = validate_key(key); !s.is_ok()) return done(s);
  if (field.empty() || field.size() > kMaxFieldName) {
    return done(Status::invalid_argument("a field name must be 1 ... 256 bytes"));
  }
  if (ttl_ms < 1) return done(Status::invalid_argument("a field's ttl must be at least 1 ms"));
  const std::string redis_key = redis_state_key(impl_->options.key_prefix, key, "fields");
  const int slot = impl_->router->routes_by_slot() ? key_hash_slot(redis_key) : kAnySlot;
  auto command = std::make_shared<const std::string>(encode_command(std::vector<std::string>{
      "EVAL", std::string(kExchange), "1", redis_key, std::string(field), std::string(value), std::to_string(ttl_ms)}));
  Impl* impl = impl_.get();
  impl->router->send(slot, std::move(command), [impl, done = std::move(done)](const Status& error, const redisReply* reply) {
    Status why = error;
    if (why.is_ok()) {
      auto v = decode_fields(reply);
      if (v.ok()) {
        impl->counters.commands.fetch_add(1, std::memory_order_relaxed);
        return done(std::move(v));
      }
      why = v.status();
    }
    impl->count_error(why);
    done(why);
  });
}

}  // namespace ratelimit
