// priority.h — priority classes of a concurrency policy (issue 30): which class a request may
// be admitted in, and which class's waiter is served next. Pure functions; the waiting service
// (src/service/waiting_loop.cc) and the lease front-ends call them, the stores never see a class
// (a class's admission is its own limit, Policy::with_limit, on the policy's one counter).
//
// Classes are listed highest first (index 0). Each has:
//   weight   >= 1: its share of the grants to waiters while several classes wait;
//   headroom in [0, 1): the fraction of the limit it leaves to higher classes. A request of the
//            class is admitted only while in-flight + cost <= class_limit(limit, headroom), and
//            a class with headroom > 0 never waits: over its limit it is refused at once
//            (refusals take the lowest classes first; critical keeps the reserved capacity).
// Serving waiters (pick_class / charge_class): credits per class, refilled to the weights when
// no waiting class has any; the highest waiting class with credit is served. Bound: a waiter at
// the head of class c's queue is admitted after at most
//     starvation_bound(c) = sum_{d != c} weight_d + sum_{d < c} weight_d
// admissions of other classes (the others spend their credits, one refill, the higher classes
// spend theirs again); for the highest class, sum_{d != 0} weight_d.
// Invariants: 1 <= classes <= kMaxClasses; credits[i] in [0, weight_i].
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ratelimit::algo {

struct PriorityClass {
  std::string name;
  int64_t weight = 1;
  double headroom = 0;
  friend bool operator==(const PriorityClass&, const PriorityClass&) = default;
};

inline constexpr size_t kMaxClasses = 16;
inline constexpr int64_t kMaxClassWeight = 1000;

// critical (weight 8, headroom 0), normal (4, 0.1), sheddable (1, 0.5).
std::vector<PriorityClass> default_classes();

// The in-flight units at which a class stops being admitted: floor(limit * (1 - headroom)),
// computed in integers of parts per million so that Lua or a client gets the same number.
int64_t class_limit(int64_t limit, double headroom);

// The class to serve next among those with waiters (`waiting[i]`); classes.size() when none.
size_t pick_class(std::span<const PriorityClass> classes, std::span<const int64_t> credits,
                  std::span<const bool> waiting);

// A waiter of class `served` was admitted while `waiting` classes had waiters: spends its credit
// (refilling every class to its weight first when no waiting class had any).
void charge_class(std::span<const PriorityClass> classes, std::span<int64_t> credits,
                  std::span<const bool> waiting, size_t served);

// See top: the most admissions of other classes before class `c`'s head waiter is admitted.
int64_t starvation_bound(std::span<const PriorityClass> classes, size_t c);

}  // namespace ratelimit::algo
