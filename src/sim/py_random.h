// py_random.h — a pseudo-random generator that reproduces CPython's `random.Random(seed)` bit
// for bit: MT19937 seeded like CPython seeds it from an integer, random() as a 53-bit double,
// and expovariate(lambd) = -log(1 - random()) / lambd.
//
// Why: experiments on rate limiters are often published as Python scripts; with the same seed
// ratelimit-sim replays exactly the same Poisson traffic, so its numbers can be checked
// against the published ones. Invariant: for every seed and call sequence, the values equal
// Python's (tests/sim/data/py_random_*.txt were produced by python3 and pin this down).
// Not thread-safe (one generator per thread), like Python's own instances.
#pragma once

#include <array>
#include <cstdint>

namespace ratelimit::sim {

class PyRandom {
 public:
  // Same sequence as Python's random.Random(seed) for a non-negative integer seed: the seed's
  // 32-bit words, least significant first, go through MT19937's init_by_array (0 -> [0]).
  explicit PyRandom(uint64_t seed);

  // Next raw 32-bit output of MT19937 (Python's getrandbits(32)).
  uint32_t next_u32();
  // Uniform double in [0, 1) with 53 random bits (Python's random()).
  double random();
  // Exponentially distributed gap with mean 1/lambd (Python's expovariate(lambd)).
  // Precondition: lambd > 0 (callers validate).
  double expovariate(double lambd);

 private:
  static constexpr int kN = 624;
  void init_genrand(uint32_t s);
  void init_by_array(const uint32_t* key, int key_length);

  std::array<uint32_t, kN> mt_{};
  int mti_ = kN + 1;
};

}  // namespace ratelimit::sim
