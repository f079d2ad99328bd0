// config_dir.h — the envoyproxy/ratelimit configuration directory: reading it, watching it
// (inotify, Kubernetes' atomic `..data` symlink swap included) and holding the last good
// RuleSet.
//
// Why: envoyproxy/ratelimit reloads through goruntime, which misses a ConfigMap update when
// only the `..data` symlink is swapped, and serves whatever part of a broken set it managed to
// load. Here a change anywhere under the watched paths (a file written, a symlink renamed
// over, a directory swapped in) triggers a reload of the whole directory; a set that fails to
// load is refused whole and the previous RuleSet keeps serving.
// Reading follows goruntime: every regular file under the directory, recursively, in path
// order; file symlinks are followed, directory symlinks are not descended (so a ConfigMap's
// `..data` and its timestamped twin are not read twice when dot files are skipped); with
// ignore_dotfiles, entries whose name starts with '.' are skipped at every level.
// Thread-safety: read_config_directory is reentrant. RuleSource: current() and generation()
// from any thread (generation() lock-free); reload() from any thread (serialised inside).
// DirectoryWatcher runs its own thread and calls its callback from it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mutex.h"
#include "rule_set.h"

namespace ratelimit::rls {

inline constexpr size_t kMaxConfigFileBytes = 1 << 20;  // per file, like ratelimitd's YAML
inline constexpr size_t kMaxConfigFiles = 10'000;

// Every file of the directory (see top). Errors: the directory is missing or unreadable, a file
// is unreadable or larger than kMaxConfigFileBytes, more than kMaxConfigFiles files.
Result<std::vector<SourceFile>> read_config_directory(const std::string& directory,
                                                      bool ignore_dotfiles);

// What a reload did, for logs and metrics.
struct ReloadResult {
  Status status;            // ok, or why the new set was refused (the old one still serves)
  bool changed = false;     // a new RuleSet was swapped in
  // only_if_changed, and the directory holds what serves or what was refused last (the same
  // bytes, or the same read error): nothing was loaded, nothing is to be logged or counted.
  bool unchanged = false;
  uint64_t generation = 0;  // of the RuleSet serving after this reload
};

// The RuleSet being served, and how to replace it from the directory.
class RuleSource {
 public:
  RuleSource(std::string directory, bool ignore_dotfiles, LoadOptions options);

  // Reads and loads the directory. On success swaps the new RuleSet in (generation + 1) —
  // unless `only_if_changed` and the files are byte-for-byte what is serving, or what was
  // refused last (ReloadResult::unchanged): a bad file is refused once per change, not once
  // per look. On failure nothing changes.
  ReloadResult reload(bool only_if_changed = false) RL_EXCLUDES(reload_mu_);

  // Serves `rules` (not null), loaded elsewhere — ratelimitd's own YAML holds its domains
  // inline — as the next generation; returns it.
  uint64_t replace(std::shared_ptr<const RuleSet> rules) RL_EXCLUDES(reload_mu_);

  // The serving RuleSet; an empty RuleSet before the first successful reload. Never null.
  // Takes a short lock: hot paths cache the pointer and re-read it when generation() moved.
  std::shared_ptr<const RuleSet> current() const {
    MutexLock lock(current_mu_);
    return current_;
  }
  // 0 before the first successful reload, then +1 per swap.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  const std::string& directory() const { return directory_; }

 private:
  const std::string directory_;
  const bool ignore_dotfiles_;
  const LoadOptions options_;
  Mutex reload_mu_;  // one reload at a time
  std::vector<SourceFile> serving_files_ RL_GUARDED_BY(reload_mu_);
  // The last refusal: the files that failed to load, or the read error.
  std::optional<std::vector<SourceFile>> refused_files_ RL_GUARDED_BY(reload_mu_);
  std::string refused_read_ RL_GUARDED_BY(reload_mu_);
  mutable Mutex current_mu_;  // a mutex, not atomic<shared_ptr>: libstdc++ 12's is opaque to
                              // ThreadSanitizer
  std::shared_ptr<const RuleSet> current_ RL_GUARDED_BY(current_mu_);
  std::atomic<uint64_t> generation_{0};
};

// Watches directories with inotify and calls `on_change` once things have been quiet for
// `quiet` after a change (a burst of events — a ConfigMap swap is five — gives one call; a
// steady stream still gives one call per `max_delay`). Each call re-arms the watches, so a
// path that is a symlink swapped to a new target is watched at its new target from then on.
// Paths that do not exist are watched once they appear (their parent is watched too).
class DirectoryWatcher {
 public:
  static Result<std::unique_ptr<DirectoryWatcher>> start(
      std::vector<std::string> paths, std::function<void()> on_change,
      std::chrono::milliseconds quiet = std::chrono::milliseconds(100),
      std::chrono::milliseconds max_delay = std::chrono::milliseconds(1000));
  ~DirectoryWatcher();  // stops and joins the thread (bounded: one poll interval)
  DirectoryWatcher(const DirectoryWatcher&) = delete;
  DirectoryWatcher& operator=(const DirectoryWatcher&) = delete;

 private:
  DirectoryWatcher() = default;
  void run();
  void arm();  // (re)adds every watch

  std::vector<std::string> paths_;
  std::function<void()> on_change_;
  std::chrono::milliseconds quiet_{100};
  std::chrono::milliseconds max_delay_{1000};
  int inotify_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: the destructor writes it
  std::vector<int> watches_;
  std::thread thread_;
};

// The paths to watch for an envoyproxy/ratelimit layout: the configuration directory and its
// real subdirectories, and every directory from RUNTIME_ROOT's parent down to it (a swap of
// the RUNTIME_ROOT symlink, or of any directory on the way, is seen).
std::vector<std::string> watch_paths(const std::string& runtime_root,
                                     const std::string& config_directory);

}  // namespace ratelimit::rls
