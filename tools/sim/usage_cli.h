// usage_cli.h — `ratelimit-sim usage ...` (usage_cli.cc): main.cc hands it the arguments after
// the word "usage". Returns the process's exit code.
#pragma once

namespace ratelimit::sim {

int usage_main(int argc, char** argv);

}  // namespace ratelimit::sim
