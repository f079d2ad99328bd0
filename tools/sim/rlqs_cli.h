// rlqs_cli.h — `ratelimit-sim rlqs ...` (rlqs_cli.cc): main.cc hands it the arguments after the
// word "rlqs". Returns the process's exit code.
#pragma once

namespace ratelimit::sim {

int rlqs_main(int argc, char** argv);

}  // namespace ratelimit::sim
