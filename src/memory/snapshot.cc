// snapshot.cc — the MemoryStore snapshot file: encoding, checked decoding, and the atomic write
// (format and invariants: snapshot.h).
#include "snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <type_traits>

#include "ratelimit/store.h"

namespace ratelimit::memory {
namespace {

constexpr char kMagic[8] = {'R', 'L', 'M', 'S', 'N', 'A', 'P', '1'};
constexpr char kEndMagic[8] = {'R', 'L', 'M', 'S', 'E', 'N', 'D', '1'};
constexpr uint32_t kByteOrder = 0x01020304;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr size_t kTrailerBytes = 8 + 8 + 8;

// 64 bits over 8-byte words: each step is a bijection of the running value and of the word,
// so any change to one word (a flipped bit) changes the result; the length is mixed in last.
uint64_t checksum(std::string_view b) {
  uint64_t h = 0x243f6a8885a308d3ULL;
  size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, b.data() + i, 8);
    h = std::rotl(h ^ w, 29) * 0x9e3779b97f4a7c15ULL;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, b.data() + i, b.size() - i);
  h = std::rotl(h ^ tail, 29) * 0x9e3779b97f4a7c15ULL;
  return std::rotl(h ^ b.size(), 31) * 0xff51afd7ed558ccdULL;
}

template <typename T>
void put(std::string& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads fields off the bytes; any read past the end marks it failed (checked once per record).
struct Reader {
  std::string_view b;
  size_t at = 0;
  bool failed = false;
  template <typename T>
  T get() {
    T v{};
    if (b.size() - at < sizeof v) {
      failed = true;
      return v;
    }
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string_view bytes(size_t n) {
    if (b.size() - at < n) {
      failed = true;
      return {};
    }
    at += n;
    return b.substr(at - n, n);
  }
};

Status bad(const std::string& why) { return Status::invalid_argument("snapshot refused: " + why); }

Result<Policy> read_policy(Reader& r) {
  const auto alg = algorithm_at(r.get<uint8_t>());
  const auto mode = r.get<uint8_t>() == 0 ? LeakyMode::kPolice : LeakyMode::kShape;
  const bool count_denied = r.get<uint8_t>() != 0;
  const bool every_hit = r.get<uint8_t>() != 0;
  const auto limit = r.get<int64_t>();
  const Micros window{r.get<int64_t>()};
  const auto rate = r.get<double>();
  const std::string name(r.bytes(r.get<uint8_t>()));
  if (r.failed || !alg) return bad("a policy record is cut short or names no algorithm");
  Result<Policy> p = Status::invalid_argument("");
  switch (*alg) {
    case Algorithm::kFixedWindow:
      p = every_hit ? Policy::fixed_window_every_hit(limit, window) : Policy::fixed_window(limit, window);
      break;
    case Algorithm::kSlidingWindowLog: p = Policy::sliding_window_log(limit, window); break;
    case Algorithm::kSlidingWindowCounter: p = Policy::sliding_window_counter(limit, window); break;
    case Algorithm::kTokenBucket: p = Policy::token_bucket(rate, limit); break;
    case Algorithm::kLeakyBucket: p = Policy::leaky_bucket(rate, limit, mode); break;
    case Algorithm::kConcurrency: p = Policy::concurrency(limit, window); break;
  }
  if (p.ok()) p = p->with_count_denied(count_denied).with_name(name);
  if (!p.ok()) return bad("policy '" + name + "': " + p.status().message());
  return p;
}

template <typename T>
bool read_packed(Reader& r, algo::AlgorithmState& out) {
  if (r.get<uint8_t>() != sizeof(T)) return false;
  out = r.get<T>();
  return true;
}

// The state of an entry of algorithm `alg`; false when it is malformed.
bool read_state(Reader& r, Algorithm alg, algo::AlgorithmState& out) {
  switch (alg) {
    case Algorithm::kFixedWindow: return read_packed<algo::FixedWindowState>(r, out);
    case Algorithm::kSlidingWindowCounter: return read_packed<algo::SlidingWindowCounterState>(r, out);
    case Algorithm::kTokenBucket: return read_packed<algo::TokenBucketState>(r, out);
    case Algorithm::kLeakyBucket: return read_packed<algo::LeakyBucketState>(r, out);
    case Algorithm::kSlidingWindowLog: {
      // A log holds at most max_recorded units (reports may put it in debt: kMaxDebtLimits
      // limits beyond its limit), each entry at least one.
      const auto n = r.get<uint32_t>();
      if (n > (algo::kMaxDebtLimits + 1) * kMaxSlidingLogLimit) return false;
      algo::SlidingWindowLogState s;
      for (uint32_t k = 0; k < n && !r.failed; ++k) {
        const auto at = r.get<int64_t>();
        const auto cost = r.get<int64_t>();
        if (cost < 1 || cost > kMaxCost) return false;
        s.entries.push_back({at, cost});
        s.units += cost;
      }
      out = std::move(s);
      return true;
    }
    case Algorithm::kConcurrency: {
      const auto n = r.get<uint32_t>();
      if (n > kMaxConcurrencyLimit) return false;
      algo::ConcurrencyState s;
      s.leases.reserve(n);
      for (uint32_t k = 0; k < n && !r.failed; ++k) {
        algo::LeaseEntry e;
        e.id = r.get<LeaseId>();
        e.expires_us = r.get<int64_t>();
        e.weight = r.get<int64_t>();
        s.leases.push_back(e);
      }
      out = std::move(s);
      return true;
    }
  }
  return false;
}

}  // namespace

SnapshotWriter::SnapshotWriter(int64_t saved_at_us) {
  out_.append(kMagic, sizeof kMagic);
  put(out_, kSnapshotVersion);
  put(out_, kByteOrder);
  put(out_, saved_at_us);
}

uint16_t SnapshotWriter::policy(const Policy& p) {
  if (auto it = names_.find(p.name()); it != names_.end()) return it->second;
  const auto index = static_cast<uint16_t>(names_.size());
  names_.emplace(p.name(), index);
  out_ += 'P';
  put(out_, index);
  put(out_, static_cast<uint8_t>(algorithm_index(p.algorithm())));
  put(out_, static_cast<uint8_t>(p.leaky_mode() == LeakyMode::kPolice ? 0 : 1));
  put(out_, static_cast<uint8_t>(p.count_denied()));
  put(out_, static_cast<uint8_t>(p.counts_every_hit()));
  put(out_, p.limit());
  put(out_, p.window().count());
  put(out_, p.rate());
  put(out_, static_cast<uint8_t>(p.name().size()));
  out_ += p.name();
  return index;
}

void SnapshotWriter::entry(uint16_t policy, uint32_t standing, std::string_view key,
                           const algo::AlgorithmState& state) {
  ++entries_;
  out_ += 'E';
  put(out_, policy);
  put(out_, static_cast<uint8_t>(standing));
  put(out_, static_cast<uint8_t>(state.index()));
  put(out_, static_cast<uint16_t>(key.size()));
  out_ += key;
  std::visit(
      [this](const auto& s) {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, algo::SlidingWindowLogState>) {
          put(out_, static_cast<uint32_t>(s.entries.size()));
          for (size_t k = 0; k < s.entries.size(); ++k) put(out_, s.entries[k]);
        } else if constexpr (std::is_same_v<T, algo::ConcurrencyState>) {
          put(out_, static_cast<uint32_t>(s.leases.size()));
          for (const algo::LeaseEntry& e : s.leases) {
            put(out_, e.id);
            put(out_, e.expires_us);
            put(out_, e.weight);
          }
        } else {
          put(out_, static_cast<uint8_t>(sizeof s));
          put(out_, s);
        }
      },
      state);
}

std::string SnapshotWriter::finish() {
  out_.append(kEndMagic, sizeof kEndMagic);
  put(out_, static_cast<uint64_t>(names_.size() + entries_));
  put(out_, checksum(out_));
  return std::move(out_);
}

Result<SnapshotContents> parse_snapshot(std::string_view b) {
  if (b.size() < kHeaderBytes + kTrailerBytes) return bad("the file is too short to be a snapshot (truncated?)");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return bad("not a ratelimit memory-store snapshot");
  Reader h{b.substr(8)};
  const auto version = h.get<uint32_t>();
  if (version != kSnapshotVersion) {
    return bad("format version " + std::to_string(version) + ", this build reads version " +
               std::to_string(kSnapshotVersion));
  }
  if (h.get<uint32_t>() != kByteOrder) return bad("written on a machine of another byte order");
  const std::string_view tail = b.substr(b.size() - kTrailerBytes);
  uint64_t records = 0;
  uint64_t sum = 0;
  std::memcpy(&records, tail.data() + 8, 8);
  std::memcpy(&sum, tail.data() + 16, 8);
  if (std::memcmp(tail.data(), kEndMagic, sizeof kEndMagic) != 0) return bad("no end marker (truncated?)");
  if (checksum(b.substr(0, b.size() - 8)) != sum) return bad("checksum mismatch (the file is damaged)");
  SnapshotContents c;
  c.saved_at_us = h.get<int64_t>();
  Reader r{b.substr(0, b.size() - kTrailerBytes), kHeaderBytes};
  while (r.at < r.b.size()) {
    const char kind = r.get<char>();
    if (kind == 'P') {
      if (r.get<uint16_t>() != c.policies.size()) return bad("policy records out of order");
      Result<Policy> p = read_policy(r);
      if (!p.ok()) return p.status();
      c.policies.push_back(std::move(*p));
      continue;
    }
    SnapshotEntry e{r.get<uint16_t>(), r.get<uint8_t>(), {}, {}};
    const auto alg = algorithm_at(r.get<uint8_t>());
    e.key = std::string(r.bytes(r.get<uint16_t>()));
    if (kind != 'E' || r.failed || !alg || e.policy >= c.policies.size() || e.standing > 2 ||
        *alg != c.policies[e.policy].algorithm() || !validate_key(e.key).is_ok() ||
        !read_state(r, *alg, e.state) || r.failed) {
      return bad("record " + std::to_string(c.policies.size() + c.entries.size() + 1) + " is malformed");
    }
    c.entries.push_back(std::move(e));
  }
  if (records != c.policies.size() + c.entries.size()) return bad("the record count does not match");
  return c;
}

Status write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  auto fail = [&](const char* what) {
    const std::string m = std::string(what) + " " + tmp + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::unavailable(m);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail("cannot fsync");
  }
  if (::close(fd) != 0) return fail("cannot close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename into place");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);  // the rename itself durable; a directory that cannot be opened keeps the file
    ::close(d);
  }
  return {};
}

Result<std::string> read_whole_file(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::not_found("no snapshot at " + path);
    return Status::unavailable("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return bad(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return n == 0 ? bad(path + " shrank while it was read")
                    : Status::unavailable("cannot read " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

}  // namespace ratelimit::memory
