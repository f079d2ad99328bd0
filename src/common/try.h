// try.h — early return on an error, for functions that return Status or Result<T>: the one
// definition of RL_TRY / RL_TRY_ASSIGN that the configuration readers (src/server/config*.cc)
// and the Envoy rule loader (src/rls/rule_set_load.cc) share.
//
// Why macros: the return must leave the caller's function, which a function cannot do.
// Invariants: `expr` is evaluated exactly once; on error its Status is returned unchanged (the
// message and code the callee chose); on success `lhs` is move-assigned the value.
#pragma once

#include <utility>

#define RL_TRY_ASSIGN(lhs, expr)          \
  do {                                     \
    auto rl_r_ = (expr);                   \
    if (!rl_r_) return rl_r_.status();     \
    lhs = std::move(*rl_r_);               \
  } while (0)

#define RL_TRY(expr)                       \
  do {                                     \
    ::ratelimit::Status rl_s_ = (expr);    \
    if (!rl_s_.is_ok()) return rl_s_;      \
  } while (0)
