// child_process.h — test support: the one way tests start a real program (redis-server,
// redis-cli, ratelimitd, openssl), so that no child outlives the test process that started it.
//
// Why: a test process killed by a ctest timeout (SIGKILL: no destructor runs) used to leave its
// redis-server and ratelimitd running for an hour, and because they inherited every fd of the
// test — among them the fd of /tmp/ratelimit-quiet.lock that `flock` hands to the test — they
// also held that lock. So every child:
//   - gets PR_SET_PDEATHSIG(SIGKILL): the kernel kills it when its parent dies, however it dies.
//     The signal fires when the *thread* that forked exits, not the process; so children are
//     forked by one spawner thread that lives until the process ends (tests start servers from
//     worker threads too, e.g. the shared Redis on first use, and those threads end early);
//   - keeps only fds 0, 1 and 2 (close_range(3, ~0) before exec): no inherited lock, socket or
//     pipe;
//   - reads stdin from /dev/null; stdout and stderr are inherited or go to one file.
// Invariants: no shell is involved (argv is passed as is; argv[0] without '/' is searched on
// PATH in the parent, so the child only calls async-signal-safe functions before execve).
// Stop a child by its pid (kill_child), never by name. Thread-safe: any thread may call these.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::testing {

// Where a child's stdout and stderr go.
struct ChildOutput {
  std::string path;     // "" : this process's stdout and stderr; else both into this file
  bool append = false;  // with a path: append (else truncate); created 0600 if missing
};

// Starts `argv` (argv[0] on PATH unless it contains '/') as a child that dies with this process
// (see above). Error: argv empty, the program not found, or fork/exec failed (the exec error is
// reported back through a pipe, so a failed exec is an error here, not an exit code later).
Result<pid_t> start_child(const std::vector<std::string>& argv, const ChildOutput& output = {});

// Waits at most `timeout` for `pid` to exit and reaps it: its wait status (see waitpid), or
// nullopt if it is still running at the deadline (it is left running).
std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds timeout);

// SIGKILL and reap. No-op for pid <= 0.
void kill_child(pid_t pid);

// Runs a program to completion, at most `timeout` (then kills it): ok when it exits 0, else an
// error with its status and, when `output_path` is a file, what it wrote there.
Status run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                   const std::string& output_path = "/dev/null");

}  // namespace ratelimit::testing
