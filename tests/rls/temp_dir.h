// temp_dir.h — a fresh directory under the system's temp directory for one test, removed with
// everything in it when the test's TempDir goes. Shared by the src/rls tests that load rule
// files from disk. Invariant: the name is random, so tests running in parallel never share one.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace ratelimit::rls::test_support {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "rls-test-") {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / (prefix + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace ratelimit::rls::test_support
