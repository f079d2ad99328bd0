// config_dir.cc — reading, watching and reloading the configuration directory (see
// config_dir.h). The watcher is a thread blocked in poll() on an inotify descriptor and an
// eventfd (for stop), so it never spins and stops within one poll interval.
#include "config_dir.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace ratelimit::rls {
namespace fs = std::filesystem;

namespace {

Status collect(const fs::path& dir, bool ignore_dotfiles, std::vector<fs::path>& out, int depth) {
  if (depth > 32) return Status::invalid_argument(dir.string() + ": directories nested too deep");
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::invalid_argument(dir.string() + ": cannot read directory: " + ec.message());
  std::vector<fs::directory_entry> entries;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Status::invalid_argument(dir.string() + ": cannot read directory: " + ec.message());
    entries.push_back(*it);
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  for (const auto& e : entries) {
    const std::string name = e.path().filename().string();
    if (ignore_dotfiles && !name.empty() && name[0] == '.') continue;
    const bool link = e.is_symlink(ec);
    if (!link && e.is_directory(ec)) {
      if (Status s = collect(e.path(), ignore_dotfiles, out, depth + 1); !s.is_ok()) return s;
      continue;
    }
    // A symlink to a directory is not descended (filepath.Walk does not either); a dangling
    // symlink or a socket is skipped.
    if (link && fs::is_directory(e.path(), ec)) continue;
    if (!fs::is_regular_file(e.path(), ec)) continue;
    out.push_back(e.path());
    if (out.size() > kMaxConfigFiles) {
      return Status::invalid_argument(dir.string() + ": more than " +
                                      std::to_string(kMaxConfigFiles) + " files");
    }
  }
  return {};
}

bool same_files(const std::vector<SourceFile>& a, const std::vector<SourceFile>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const SourceFile& x, const SourceFile& y) {
           return x.name == y.name && x.text == y.text;
         });
}

}  // namespace

Result<std::vector<SourceFile>> read_config_directory(const std::string& directory,
                                                      bool ignore_dotfiles) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    return Status::invalid_argument(directory + ": not a directory (RUNTIME_ROOT/"
                                    "RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)");
  }
  std::vector<fs::path> paths;
  if (Status s = collect(directory, ignore_dotfiles, paths, 0); !s.is_ok()) return s;
  std::vector<SourceFile> files;
  files.reserve(paths.size());
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return Status::invalid_argument(p.string() + ": cannot open: " + std::strerror(errno));
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      text.append(buf, static_cast<size_t>(in.gcount()));
      if (text.size() > kMaxConfigFileBytes) {
        return Status::invalid_argument(p.string() + ": larger than " +
                                        std::to_string(kMaxConfigFileBytes) + " bytes");
      }
    }
    if (in.bad()) return Status::invalid_argument(p.string() + ": read error");
    files.push_back({p.string(), std::move(text)});
  }
  return files;
}

// ---------------------------------------------------------------------------------------

RuleSource::RuleSource(std::string directory, bool ignore_dotfiles, LoadOptions options)
    : directory_(std::move(directory)), ignore_dotfiles_(ignore_dotfiles), options_(std::move(options)) {
  auto empty = RuleSet::load({}, options_);
  current_ = *empty;
}

ReloadResult RuleSource::reload(bool only_if_changed) {
  MutexLock lock(reload_mu_);
  ReloadResult r;
  r.generation = generation();
  auto files = read_config_directory(directory_, ignore_dotfiles_);
  if (!files) {
    r.status = files.status();
    r.unchanged = only_if_changed && !refused_files_ && refused_read_ == r.status.message();
    refused_files_.reset();
    refused_read_ = r.status.message();
    return r;
  }
  if (only_if_changed && ((generation() > 0 && same_files(*files, serving_files_)) ||
                          (refused_files_ && same_files(*files, *refused_files_)))) {
    r.unchanged = true;
    return r;
  }
  auto set = RuleSet::load(*files, options_);
  if (!set) {
    r.status = set.status();
    refused_files_ = std::move(*files);
    refused_read_.clear();
    return r;
  }
  refused_files_.reset();
  refused_read_.clear();
  {
    MutexLock swap(current_mu_);
    current_ = std::move(*set);
  }
  serving_files_ = std::move(*files);
  r.changed = true;
  r.generation = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  return r;
}

uint64_t RuleSource::replace(std::shared_ptr<const RuleSet> rules) {
  MutexLock lock(reload_mu_);
  {
    MutexLock swap(current_mu_);
    current_ = std::move(rules);
  }
  serving_files_.clear();  // the next reload(only_if_changed) reads the directory anew
  refused_files_.reset();
  refused_read_.clear();
  return generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

// ---------------------------------------------------------------------------------------

std::vector<std::string> watch_paths(const std::string& runtime_root,
                                     const std::string& config_directory) {
  std::vector<std::string> out;
  const fs::path root = fs::path(runtime_root).lexically_normal();
  const fs::path dir = fs::path(config_directory).lexically_normal();
  // From RUNTIME_ROOT's parent down to the configuration directory.
  fs::path p = root.has_parent_path() ? root.parent_path() : root;
  out.push_back(p.string());
  const fs::path rel = dir.lexically_relative(p);
  if (!rel.empty() && *rel.begin() != "..") {
    for (const auto& part : rel) {
      p /= part;
      out.push_back(p.string());
    }
  } else {
    out.push_back(dir.string());
  }
  return out;
}

Result<std::unique_ptr<DirectoryWatcher>> DirectoryWatcher::start(
    std::vector<std::string> paths, std::function<void()> on_change,
    std::chrono::milliseconds quiet, std::chrono::milliseconds max_delay) {
  std::unique_ptr<DirectoryWatcher> w(new DirectoryWatcher());
  w->paths_ = std::move(paths);
  w->on_change_ = std::move(on_change);
  w->quiet_ = quiet;
  w->max_delay_ = max_delay;
  w->inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (w->inotify_fd_ < 0) {
    return Status::internal(std::string("inotify_init1: ") + std::strerror(errno));
  }
  w->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->stop_fd_ < 0) {
    ::close(w->inotify_fd_);
    w->inotify_fd_ = -1;
    return Status::internal(std::string("eventfd: ") + std::strerror(errno));
  }
  w->arm();
  w->thread_ = std::thread([raw = w.get()] { raw->run(); });
  return w;
}

DirectoryWatcher::~DirectoryWatcher() {
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void DirectoryWatcher::arm() {
  for (int wd : watches_) inotify_rm_watch(inotify_fd_, wd);
  watches_.clear();
  constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                             IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF |
                             IN_MOVE_SELF;
  std::vector<std::string> all;
  for (const std::string& p : paths_) {
    all.push_back(p);
    // The real subdirectories of the last path (the configuration directory), recursively.
    if (&p != &paths_.back()) continue;
    std::error_code ec;
    fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec);
    for (int n = 0; !ec && it != fs::recursive_directory_iterator() && n < 4096; ++n) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) all.push_back(it->path().string());
      it.increment(ec);
    }
  }
  for (const std::string& p : all) {
    // Following symlinks (the default) watches a symlinked directory at its current target.
    const int wd = inotify_add_watch(inotify_fd_, p.c_str(), kMask);
    if (wd >= 0) watches_.push_back(wd);
  }
}

void DirectoryWatcher::run() {
  using Clock = std::chrono::steady_clock;
  bool pending = false;
  Clock::time_point first{}, last{};
  alignas(inotify_event) char buf[8192];
  for (;;) {
    int timeout_ms = 1000;
    if (pending) {
      const auto now = Clock::now();
      const auto due = std::min(last + quiet_, first + max_delay_);
      timeout_ms = due <= now ? 0
                              : static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     due - now).count()) + 1;
    }
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) return;
    if (n > 0 && (fds[0].revents & POLLIN)) {
      // IN_IGNORED is the kernel confirming a watch was removed — arm() removes every watch
      // before re-adding them, so counting it as a change made each call schedule the next,
      // and a refused set was reloaded (and logged, and counted) every `quiet_` for ever.
      bool any = false;
      for (;;) {
        const ssize_t got = ::read(inotify_fd_, buf, sizeof buf);
        if (got <= 0) break;
        for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= got;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
          if ((ev->mask & IN_IGNORED) == 0) any = true;
          at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        }
      }
      if (any) {
        const auto now = Clock::now();
        if (!pending) first = now;
        pending = true;
        last = now;
      }
    }
    if (pending) {
      const auto now = Clock::now();
      if (now >= last + quiet_ || now >= first + max_delay_) {
        pending = false;
        arm();  // targets may have moved (a swapped symlink); watch them where they are now
        on_change_();
      }
    }
  }
}

}  // namespace ratelimit::rls
