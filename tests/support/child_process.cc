// child_process.cc — see child_process.h. fork + execve on one long-lived spawner thread, so
// that PR_SET_PDEATHSIG (which follows the forking thread) fires only when the test process
// ends; between fork and execve the child calls only async-signal-safe functions on data the
// parent prepared.
#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "mutex.h"

extern char** environ;

namespace ratelimit::testing {
namespace {

// argv[0] as an executable path: itself if it names a path, else the first match on PATH.
std::string resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  size_t from = 0;
  for (;;) {
    const size_t to = path.find(':', from);
    std::string dir = path.substr(from, to == std::string::npos ? std::string::npos : to - from);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (to == std::string::npos) return "";
    from = to + 1;
  }
}

// Closes every fd >= 3 except `keep`. close_range(2) where the kernel has it (5.9+), else one
// close() per possible fd. Async-signal-safe.
void close_fds_except(int keep) {
  const auto upto = [](unsigned first, unsigned last) {
    if (first > last) return;
    if (::syscall(SYS_close_range, first, last, 0) == 0) return;
    const long max = ::sysconf(_SC_OPEN_MAX);
    const unsigned end = max > 0 && max < 65536 ? static_cast<unsigned>(max) : 65536U;
    for (unsigned fd = first; fd < end && fd <= last; ++fd) ::close(static_cast<int>(fd));
  };
  upto(3, static_cast<unsigned>(keep) - 1);
  upto(static_cast<unsigned>(keep) + 1, UINT_MAX);
}

// Runs in the child, after fork. Only async-signal-safe calls; returns only on failure (errno set).
void exec_child(const char* path, char* const* argv, const char* output, bool append,
                pid_t parent, int error_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl: die too
  const int in = ::open("/dev/null", O_RDONLY);
  if (in < 0 || ::dup2(in, 0) < 0) return;
  if (output != nullptr) {
    const int out = ::open(output, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0600);
    if (out < 0 || ::dup2(out, 1) < 0 || ::dup2(1, 2) < 0) return;
  }
  close_fds_except(error_fd);  // error_fd is O_CLOEXEC: execve closes it
  ::execve(path, argv, environ);
}

Result<pid_t> fork_exec(const std::vector<std::string>& args, const ChildOutput& output) {
  if (args.empty()) return Status::invalid_argument("start_child: empty argv");
  const std::string path = resolve(args[0]);
  if (path.empty()) return Status::unavailable("cannot run " + args[0] + ": not found on PATH");
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::internal(std::string("pipe2: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    exec_child(path.c_str(), argv.data(), output.path.empty() ? nullptr : output.path.c_str(),
               output.append, parent, fds[1]);
    const int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    return Status::internal(std::string("fork: ") + std::strerror(err));
  }
  int err = 0;
  ssize_t n;
  while ((n = ::read(fds[0], &err, sizeof err)) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  if (n > 0) {  // the child reported why it could not exec, and exited
    kill_child(pid);
    return Status::unavailable("cannot run " + args[0] + ": " + std::strerror(err));
  }
  return pid;
}

// The thread that forks every child. It is never joined and never ends before the process, so
// a child's PR_SET_PDEATHSIG fires exactly when the test process dies.
class Spawner {
 public:
  static Spawner& instance() {
    static Spawner* s = new Spawner();  // leaked on purpose: the thread outlives static destructors
    return *s;
  }

  Result<pid_t> run(std::function<Result<pid_t>()> fn) {
    Job job{std::move(fn), std::nullopt};
    MutexLock lock(mu_);
    queue_.push_back(&job);
    wake_.notify_all();
    while (!job.result) lock.wait(done_);
    return *std::move(job.result);
  }

 private:
  struct Job {
    std::function<Result<pid_t>()> fn;
    std::optional<Result<pid_t>> result;
  };

  Spawner() { std::thread([this] { loop(); }).detach(); }

  void loop() {
    MutexLock lock(mu_);
    for (;;) {
      while (queue_.empty()) lock.wait(wake_);
      Job* job = queue_.front();
      queue_.pop_front();
      job->result = job->fn();  // forks under mu_: no other thread of ours forks meanwhile
      done_.notify_all();
    }
  }

  Mutex mu_;
  std::condition_variable wake_, done_;
  std::deque<Job*> queue_ RL_GUARDED_BY(mu_);
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<pid_t> start_child(const std::vector<std::string>& argv, const ChildOutput& output) {
  return Spawner::instance().run([&] { return fork_exec(argv, output); });
}

std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds timeout) {
  if (pid <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return std::nullopt;  // not our child (already reaped)
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waiting for a real process
  }
}

void kill_child(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

Status run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                   const std::string& output_path) {
  auto pid = start_child(argv, ChildOutput{output_path, false});
  if (!pid.ok()) return pid.status();
  const std::optional<int> status = wait_child(*pid, timeout);
  if (!status) {
    kill_child(*pid);
    return Status::deadline_exceeded(argv[0] + " did not finish in time");
  }
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return {};
  std::string line;
  for (const auto& a : argv) line += a + " ";
  std::string why = "failed (status " + std::to_string(*status) + "): " + line;
  if (output_path != "/dev/null") why += "\n" + read_file(output_path);
  return Status::unavailable(why);
}

}  // namespace ratelimit::testing
