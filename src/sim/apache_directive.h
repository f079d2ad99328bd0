// apache_directive.h — what one Apache LogFormat directive (%h, %{Referer}i, %{ms}T…) is
// called among ratelimit-sim's field names (log_format.h lists them), so that an Apache log
// and an nginx log of the same traffic give the same keys.
//
// Why apart from AccessLogFormat::apache: the compiler walks the format string; this is the
// table of directives, long and flat, and read on its own. %t without an argument is not here:
// it writes brackets around the time, which only the compiler can place.
#pragma once

#include <optional>
#include <string>

#include "ratelimit/status.h"

namespace ratelimit::sim {

// The field name for directive `d` with its %{arg} if any. Errors (invalid_argument) say what
// the directive needs or that it is unknown; the caller adds where it stands in the format.
Result<std::string> apache_field_name(char d, const std::optional<std::string>& arg);

}  // namespace ratelimit::sim
