// lease_id.cc — new_lease_id(): the random 128-bit ids of concurrency leases (store.h).
//
// Why the kernel's CSPRNG: a lease id is the proof of ownership a release or renew presents, so
// it must not be guessable from ids seen before (a PRNG seeded once would be). getrandom(2) per
// id costs a system call, so each thread draws 4 KiB at a time and hands out 16 bytes per id
// (256 ids per call). Invariants: no two ids come from the same bytes — a thread's buffer is
// used once, and a forked child discards the buffer it inherited (the parent would hand out the
// same ids) by comparing the fork generation, bumped by a pthread_atfork child handler.
#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ratelimit/store.h"

namespace ratelimit {
namespace {

std::atomic<uint64_t> fork_generation{0};

void on_fork_child() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

struct ForkHook {
  ForkHook() { pthread_atfork(nullptr, nullptr, on_fork_child); }
};
const ForkHook fork_hook;

void fill_random(unsigned char* p, size_t n) {
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

struct Pool {
  static constexpr size_t kBytes = 4096;
  unsigned char bytes[kBytes];
  size_t used = kBytes;  // empty
  uint64_t generation = 0;
};

}  // namespace

LeaseId new_lease_id() {
  thread_local Pool pool;
  const uint64_t gen = fork_generation.load(std::memory_order_relaxed);
  if (pool.used + 16 > Pool::kBytes || pool.generation != gen) {
    fill_random(pool.bytes, Pool::kBytes);
    pool.used = 0;
    pool.generation = gen;
  }
  LeaseId id;
  std::memcpy(id.bytes.data(), pool.bytes + pool.used, 16);
  std::memset(pool.bytes + pool.used, 0, 16);  // a used id's bytes are not kept around
  pool.used += 16;
  if (id.empty()) id.bytes[0] = 1;  // all zero means "no lease" (probability 2^-128)
  return id;
}

}  // namespace ratelimit
