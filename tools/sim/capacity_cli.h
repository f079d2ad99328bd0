// capacity_cli.h — `ratelimit-sim capacity ...` (capacity_cli.cc): main.cc hands it the
// arguments after the word "capacity". Returns the process's exit code.
#pragma once

namespace ratelimit::sim {

int capacity_main(int argc, char** argv);

}  // namespace ratelimit::sim
