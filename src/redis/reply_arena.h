// reply_arena.h — hiredis reply objects built in a bump arena instead of one calloc per element:
// a connection's redisReader hands out replies whose redisReply nodes, element arrays and
// strings all live in the connection's arena, freed together by one reset().
//
// Why: a batch's reply is an array of four or six integers per decision, and hiredis' default
// functions make every element its own calloc'd object (plus its free later) — on the client's
// one core, that was a visible share of a decision's cost. The objects keep hiredis' layout, so
// every consumer still reads a plain `const redisReply*`.
// Invariants:
//   - a reply made by make_arena_reader() is valid until the arena's next reset(); the
//     connection resets after each top-level reply's callback (a callback's reply is only valid
//     during the call, as ReplyCallback says), when the reader holds no partial reply;
//   - freeReplyObject() must never be called on such a reply (the reader's freeObject is a
//     no-op; the memory goes with reset() or the arena);
//   - memory held between resets is bounded by the largest reply (one chunk is kept).
// Thread-safety: none; one arena per connection, used on its I/O thread.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

struct redisReader;

namespace ratelimit::redis_detail {

class ReplyArena {
 public:
  ReplyArena() = default;
  ReplyArena(const ReplyArena&) = delete;
  ReplyArena& operator=(const ReplyArena&) = delete;

  // Zeroed memory for `n` bytes, aligned for any reply object.
  void* allocate(size_t n);
  // Frees everything allocated since the last reset (keeps one chunk for reuse).
  void reset();

 private:
  static constexpr size_t kChunk = 32 * 1024;
  std::vector<std::unique_ptr<char[]>> chunks_;  // chunks_.back() is being filled
  std::vector<size_t> sizes_;
  size_t used_ = 0;  // bytes of chunks_.back() handed out
};

// A reader whose replies are built in `arena` (which must outlive it); free with
// redisReaderFree. Null when out of memory.
redisReader* make_arena_reader(ReplyArena& arena);

}  // namespace ratelimit::redis_detail
