// priority.cc — priority classes: class limits and the weighted order of waiters (see
// include/ratelimit/priority.h for the rules and the starvation bound they guarantee).
#include "ratelimit/priority.h"

#include <cmath>

namespace ratelimit::algo {
namespace {

bool any_credit(std::span<const int64_t> credits, std::span<const bool> waiting) {
  for (size_t i = 0; i < credits.size() && i < waiting.size(); ++i) {
    if (waiting[i] && credits[i] > 0) return true;
  }
  return false;
}

}  // namespace

std::vector<PriorityClass> default_classes() {
  return {{"critical", 8, 0.0}, {"normal", 4, 0.1}, {"sheddable", 1, 0.5}};
}

int64_t class_limit(int64_t limit, double headroom) {
  // Parts per million, rounded to the nearest (0.1 is not exact in binary), then floor of the
  // product: limit 10, headroom 0.5 -> 5; limit 7, headroom 0.5 -> 3.
  const auto keep_ppm = static_cast<int64_t>(std::llround((1.0 - headroom) * 1e6));
  constexpr int64_t kPpm = 1'000'000;  // split so that limit * keep_ppm never overflows
  return (limit / kPpm) * keep_ppm + (limit % kPpm) * keep_ppm / kPpm;
}

size_t pick_class(std::span<const PriorityClass> classes, std::span<const int64_t> credits,
                  std::span<const bool> waiting) {
  const bool refill = !any_credit(credits, waiting);  // as if every class had its weight again
  for (size_t i = 0; i < classes.size() && i < waiting.size(); ++i) {
    if (waiting[i] && (refill || credits[i] > 0)) return i;
  }
  return classes.size();
}

void charge_class(std::span<const PriorityClass> classes, std::span<int64_t> credits,
                  std::span<const bool> waiting, size_t served) {
  if (served >= classes.size() || served >= credits.size()) return;
  if (!any_credit(credits, waiting)) {
    for (size_t i = 0; i < classes.size() && i < credits.size(); ++i) credits[i] = classes[i].weight;
  }
  if (credits[served] > 0) --credits[served];
}

int64_t starvation_bound(std::span<const PriorityClass> classes, size_t c) {
  int64_t bound = 0;
  for (size_t d = 0; d < classes.size(); ++d) {
    if (d != c) bound += classes[d].weight;
    if (d < c) bound += classes[d].weight;
  }
  return bound;
}

}  // namespace ratelimit::algo
