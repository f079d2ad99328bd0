// snapshot.h — the MemoryStore snapshot file: what MemoryStore::save writes and load reads
// (memory_store.h has the contract). Internal to src/memory.
//
// Why: with the memory store every restart gave every client a fresh limit (issue 33). The
// file keeps each live key's state and its policy's definition, so a restarted store decides
// as if it had never stopped.
// Format (version 1, native byte order, written and read by the same build family):
//   header  "RLMSNAP1" | u32 version | u32 0x01020304 (byte order) | i64 saved_at_us
//   records 'P' u16 index, u8 algorithm, u8 leaky mode, u8 count_denied, u8 every_hit,
//               i64 limit, i64 window_us, f64 rate, u8 name length, name
//           'E' u16 policy index, u8 standing, u8 algorithm, u16 key length, key, state:
//               packed states: u8 size, their bytes; sliding log: u32 n, n x (i64 at, i64 cost);
//               leases: u32 n, n x (16-byte id, i64 expires, i64 weight)
//   trailer "RLMSEND1" | u64 records | u64 checksum of every byte before it
// Invariants: a file is read whole and checked (size, magic, version, byte order, checksum,
// every record, every policy valid) before anything is applied, so a damaged or foreign file
// changes nothing; a write goes to `path.tmp`, is fsynced, renamed over `path`, and the
// directory fsynced, so `path` is always the old file or the new one, whole.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit::memory {

inline constexpr uint32_t kSnapshotVersion = 1;

// Builds a snapshot in memory, one shard at a time.
class SnapshotWriter {
 public:
  explicit SnapshotWriter(int64_t saved_at_us);
  // The index of `policy` (its record written the first time its name is seen; at most 65,536
  // names, the shards' policy tables' bound).
  uint16_t policy(const Policy& policy);
  void entry(uint16_t policy, uint32_t standing, std::string_view key,
             const algo::AlgorithmState& state);
  // The whole file: header, records, trailer.
  std::string finish();
  size_t policies() const { return names_.size(); }
  size_t entries() const { return entries_; }

 private:
  std::string out_;
  std::unordered_map<std::string, uint16_t> names_;  // name -> index
  size_t entries_ = 0;
};

// One key read back.
struct SnapshotEntry {
  uint16_t policy;
  uint32_t standing;
  std::string key;
  algo::AlgorithmState state;
};
struct SnapshotContents {
  int64_t saved_at_us = 0;
  std::vector<Policy> policies;
  std::vector<SnapshotEntry> entries;
};

// Parses a whole file's bytes; kInvalidArgument saying what is wrong (truncated, not a
// snapshot, another version or byte order, checksum mismatch, a bad record).
Result<SnapshotContents> parse_snapshot(std::string_view bytes);

// Writes `bytes` to `path` atomically (path.tmp, fsync, rename, fsync of the directory).
Status write_file_atomically(const std::string& path, std::string_view bytes);
// The file's bytes; kNotFound when it does not exist, kUnavailable on another error, and
// kInvalidArgument when it is larger than `max_bytes`.
Result<std::string> read_whole_file(const std::string& path, size_t max_bytes);

}  // namespace ratelimit::memory
