// svg_usage.h — the usage model's run as a chart (ratelimit-sim usage --svg): for each
// reservation strategy, the units the policy's count held over time against the limit. Above the
// limit is debt: usage reported after the fact that the key repays by refusing everything.
// Why: the table says how deep and how long; the chart shows when — reserve_max flat under the
// limit, the others riding over it in bursts as long answers report.
// Invariants: a self-contained <svg> (no script, no external reference); a line's point per
// pixel column is the most the count held in that column (a debt's peak is never smoothed
// away); the y scale starts at 0 and holds the limit and every peak; deterministic.
#pragma once

#include <string>

#include "usage.h"

namespace ratelimit::sim {

std::string render_usage_svg(const UsageReport& report);

}  // namespace ratelimit::sim
