// py_random.cc — MT19937 (Matsumoto & Nishimura, mt19937ar.c) with CPython's seeding and
// conversions (Modules/_randommodule.c, Lib/random.py). See py_random.h.
#include "py_random.h"

#include <cmath>

namespace ratelimit::sim {
namespace {

constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;

}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  // CPython: key = abs(seed) as little-endian 32-bit words, at least one word.
  uint32_t key[2] = {static_cast<uint32_t>(seed & 0xffffffffU), static_cast<uint32_t>(seed >> 32)};
  init_by_array(key, key[1] != 0 ? 2 : 1);
}

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) {
    const uint32_t prev = mt_[static_cast<size_t>(i - 1)];
    mt_[static_cast<size_t>(i)] = 1812433253U * (prev ^ (prev >> 30)) + static_cast<uint32_t>(i);
  }
  mti_ = kN;
}

void PyRandom::init_by_array(const uint32_t* key, int key_length) {
  init_genrand(19650218U);
  int i = 1;
  int j = 0;
  for (int k = kN > key_length ? kN : key_length; k > 0; --k) {
    const uint32_t prev = mt_[static_cast<size_t>(i - 1)];
    mt_[static_cast<size_t>(i)] = (mt_[static_cast<size_t>(i)] ^ ((prev ^ (prev >> 30)) * 1664525U)) +
                                  key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    const uint32_t prev = mt_[static_cast<size_t>(i - 1)];
    mt_[static_cast<size_t>(i)] =
        (mt_[static_cast<size_t>(i)] ^ ((prev ^ (prev >> 30)) * 1566083941U)) -
        static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;  // MSB is 1, assuring a non-zero initial array
}

uint32_t PyRandom::next_u32() {
  if (mti_ >= kN) {
    int kk = 0;
    auto twist = [this](int a, int b, int c) {
      const uint32_t y = (mt_[static_cast<size_t>(a)] & kUpperMask) |
                         (mt_[static_cast<size_t>(b)] & kLowerMask);
      mt_[static_cast<size_t>(a)] =
          mt_[static_cast<size_t>(c)] ^ (y >> 1) ^ ((y & 1U) != 0 ? kMatrixA : 0U);
    };
    for (; kk < kN - kM; ++kk) twist(kk, kk + 1, kk + kM);
    for (; kk < kN - 1; ++kk) twist(kk, kk + 1, kk + (kM - kN));
    twist(kN - 1, 0, kM - 1);
    mti_ = 0;
  }
  uint32_t y = mt_[static_cast<size_t>(mti_++)];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

double PyRandom::random() {
  const uint32_t a = next_u32() >> 5;
  const uint32_t b = next_u32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

double PyRandom::expovariate(double lambd) { return -std::log(1.0 - random()) / lambd; }

}  // namespace ratelimit::sim
