// reply_arena.cc — hiredis reply objects in a bump arena (see reply_arena.h).
#include "reply_arena.h"

#include <hiredis/hiredis.h>

#include <cstring>

namespace ratelimit::redis_detail {
namespace {

constexpr size_t kAlign = alignof(std::max_align_t);

ReplyArena& arena_of(const redisReadTask* task) { return *static_cast<ReplyArena*>(task->privdata); }

// As hiredis' own create functions: a new object, linked into its parent array.
redisReply* make_object(const redisReadTask* task, int type) {
  auto* r = static_cast<redisReply*>(arena_of(task).allocate(sizeof(redisReply)));
  r->type = type;
  if (task->parent != nullptr) {
    auto* parent = static_cast<redisReply*>(task->parent->obj);
    parent->element[task->idx] = r;
  }
  return r;
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  redisReply* r = make_object(task, task->type);
  r->str = static_cast<char*>(arena_of(task).allocate(len + 1));
  std::memcpy(r->str, str, len);
  r->str[len] = '\0';
  r->len = len;
  return r;
}

// hiredis 0.14 passes the element count as int, 1.x as size_t: one template for both.
template <typename F>
struct CreateArray;
template <typename Count>
struct CreateArray<void* (*)(const redisReadTask*, Count)> {
  static void* create(const redisReadTask* task, Count elements) {
    redisReply* r = make_object(task, REDIS_REPLY_ARRAY);
    const auto n = static_cast<size_t>(elements);
    if (n > 0) {
      r->element = static_cast<redisReply**>(arena_of(task).allocate(n * sizeof(redisReply*)));
    }
    r->elements = n;
    return r;
  }
};

void* create_integer(const redisReadTask* task, long long value) {
  redisReply* r = make_object(task, REDIS_REPLY_INTEGER);
  r->integer = value;
  return r;
}

void* create_nil(const redisReadTask* task) { return make_object(task, REDIS_REPLY_NIL); }

void free_object(void*) {}  // the arena owns the memory

redisReplyObjectFunctions make_functions() {
  redisReplyObjectFunctions f{};  // hiredis 1.x's RESP3-only members stay null: RESP2 only
  f.createString = create_string;
  f.createArray = &CreateArray<decltype(f.createArray)>::create;
  f.createInteger = create_integer;
  f.createNil = create_nil;
  f.freeObject = free_object;
  return f;
}

redisReplyObjectFunctions arena_functions = make_functions();

}  // namespace

void* ReplyArena::allocate(size_t n) {
  n = (n + kAlign - 1) / kAlign * kAlign;
  if (chunks_.empty() || used_ + n > sizes_.back()) {
    const size_t size = std::max(kChunk, n);
    chunks_.push_back(std::make_unique<char[]>(size));  // zeroed: make_unique value-initialises
    sizes_.push_back(size);
    used_ = 0;
  }
  char* p = chunks_.back().get() + used_;
  used_ += n;
  return p;
}

void ReplyArena::reset() {
  if (chunks_.empty()) return;
  if (chunks_.size() > 1) {
    // Keep the largest (the last one made) for reuse.
    chunks_.front() = std::move(chunks_.back());
    sizes_.front() = sizes_.back();
    chunks_.resize(1);
    sizes_.resize(1);
  }
  std::memset(chunks_.front().get(), 0, used_);
  used_ = 0;
}

redisReader* make_arena_reader(ReplyArena& arena) {
  redisReader* r = redisReaderCreateWithFunctions(&arena_functions);
  if (r != nullptr) r->privdata = &arena;
  return r;
}

}  // namespace ratelimit::redis_detail
