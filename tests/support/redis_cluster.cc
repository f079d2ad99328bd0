// redis_cluster.cc — a six-node Redis Cluster for tests (see redis_cluster.h). redis-cli runs
// through run_program (child_process.h: no shell) with its output in a file, waited for with a
// deadline and killed by pid if it overruns.
#include "redis_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool bindable(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  // NOLINTNEXTLINE: the sockets API takes sockaddr*.
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// A cluster node needs its port and the bus port (port + 10000) free. Ports 20000 ... 22767
// (buses 30000 ... 32767) lie below Linux's default ephemeral range (32768 ...), so outgoing
// connections do not take them between this check and redis-server's bind (bus ports up to
// 39999 did: "bind: Address already in use" on a busy machine); start() also retries.
Result<uint16_t> free_cluster_port() {
  std::random_device rd;
  for (int i = 0; i < 500; ++i) {
    const auto port = static_cast<uint16_t>(20000 + rd() % 2768);
    if (bindable(port) && bindable(static_cast<uint16_t>(port + 10000))) return port;
  }
  return Status::unavailable("no free port pair (p, p + 10000) for a cluster node");
}

// A RESP2 map (flat array) entry.
const Reply* field(const Reply& map, const std::string& key) {
  for (size_t i = 0; i + 1 < map.elements.size(); i += 2) {
    if (map.elements[i].str == key) return &map.elements[i + 1];
  }
  return nullptr;
}

}  // namespace

Status RedisCluster::start(milliseconds node_timeout, milliseconds timeout) {
  const auto deadline = steady_clock::now() + timeout;
  std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
  for (size_t i = 0; i < kNodes; ++i) {
    std::unique_ptr<RedisServer> n;
    Status s = Status::unavailable("no attempt");
    // A port found free can be taken before redis-server binds it (or its bus port): another
    // pair, up to five times, when that is why it exited (a fresh server: its own directory,
    // no nodes.conf left by the attempt that failed).
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto port = free_cluster_port();
      if (!port.ok()) return port.status();
      n = std::make_unique<RedisServer>();
      // Validity factor 0: a replica always stands for election, however long ago it last
      // heard from its master (a young test cluster's replicas would otherwise count as too
      // stale).
      s = n->start(*port, {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", std::to_string(node_timeout.count()),
                           "--cluster-replica-validity-factor", "0"});
      if (s.is_ok() || s.message().find("Address already in use") == std::string::npos) break;
    }
    if (!s.is_ok()) return s;
    create.push_back("127.0.0.1:" + std::to_string(n->port()));
    nodes_.push_back(std::move(n));
  }
  create.insert(create.end(), {"--cluster-replicas", "1", "--cluster-yes"});
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("ratelimit-cluster-create-" + std::to_string(::getpid()) + "-" +
                            std::to_string(nodes_.front()->port()) + ".log"))
                              .string();
  Status created = run_program(
      create, std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()), out);
  std::filesystem::remove(out);
  if (!created.is_ok()) return created;
  return wait_until_ok(
      std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()));
}

std::string RedisCluster::url() const {
  return "redis-cluster://127.0.0.1:" + std::to_string(nodes_.at(0)->port()) + ",127.0.0.1:" +
         std::to_string(nodes_.at(1)->port());
}

size_t RedisCluster::index_of_port(uint16_t port) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  return kNodes;
}

Result<std::string> RedisCluster::node_id(size_t i) {
  auto c = RedisClient::connect(node_url(i));
  if (!c.ok()) return c.status();
  auto r = c->command({"CLUSTER", "MYID"});
  if (!r.ok()) return r.status();
  if (r->is_error()) return Status::internal("CLUSTER MYID: " + r->str);
  return r->str;
}

Result<size_t> RedisCluster::master_of_slot(int slot, size_t ask) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const size_t n = ask < kNodes ? ask : i;
    if (!nodes_[n]->running()) continue;
    auto c = RedisClient::connect(node_url(n));
    if (!c.ok()) continue;
    auto r = c->command({"CLUSTER", "SHARDS"});
    if (!r.ok() || r->is_error()) continue;
    for (const Reply& shard : r->elements) {
      const Reply* slots = field(shard, "slots");
      const Reply* members = field(shard, "nodes");
      if (slots == nullptr || members == nullptr) continue;
      bool has = false;
      for (size_t s = 0; s + 1 < slots->elements.size(); s += 2) {
        has = has || (slots->elements[s].integer <= slot && slot <= slots->elements[s + 1].integer);
      }
      if (!has) continue;
      for (const Reply& m : members->elements) {
        const Reply* role = field(m, "role");
        const Reply* health = field(m, "health");
        const Reply* port = field(m, "port");
        if (role != nullptr && role->str == "master" && health != nullptr &&
            health->str == "online" && port != nullptr) {
          const size_t idx = index_of_port(static_cast<uint16_t>(port->integer));
          if (idx < kNodes) return idx;
        }
      }
    }
    if (ask < kNodes) break;
  }
  return Status::unavailable("no online master serves slot " + std::to_string(slot));
}

Result<std::vector<size_t>> RedisCluster::masters() {
  std::vector<size_t> out;
  for (int slot : {0, 8192, 16383}) {
    auto m = master_of_slot(slot);
    if (!m.ok()) return m.status();
    if (std::find(out.begin(), out.end(), *m) == out.end()) out.push_back(*m);
  }
  return out;
}

Status RedisCluster::wait_until_ok(milliseconds timeout, int slot, size_t not_node) {
  const auto deadline = steady_clock::now() + timeout;
  std::string last = "not checked";
  for (;;) {
    bool ok = true;
    for (size_t i = 0; i < nodes_.size() && ok; ++i) {
      if (!nodes_[i]->running()) continue;
      auto c = RedisClient::connect(node_url(i));
      auto r = c.ok() ? c->command({"CLUSTER", "INFO"}) : Result<Reply>(c.status());
      if (!r.ok() || r->str.find("cluster_state:ok") == std::string::npos ||
          r->str.find("cluster_slots_assigned:16384") == std::string::npos) {
        ok = false;
        last = "node " + std::to_string(i) + ": " + (r.ok() ? r->str.substr(0, 80) : r.status().message());
      }
    }
    if (ok && slot >= 0) {
      auto m = master_of_slot(slot);
      ok = m.ok() && *m != not_node;
      if (!ok) last = "slot " + std::to_string(slot) + " not served by a new master yet";
    }
    if (ok) {
      auto m = masters();
      ok = m.ok() && m->size() == 3;
      if (!ok) last = "masters do not agree yet";
    }
    // Every running replica has finished its first sync (it could not take over otherwise).
    for (size_t i = 0; i < nodes_.size() && ok; ++i) {
      if (!nodes_[i]->running()) continue;
      auto c = RedisClient::connect(node_url(i));
      auto r = c.ok() ? c->command({"INFO", "replication"}) : Result<Reply>(c.status());
      if (!r.ok()) {
        ok = false;
      } else if (r->str.find("role:slave") != std::string::npos &&
                 r->str.find("master_link_status:up") == std::string::npos) {
        // A replica of the killed master stays down; only the masters' replicas count.
        const size_t at = r->str.find("master_port:");
        const auto master_port =
            at == std::string::npos ? 0 : std::atoi(r->str.c_str() + at + 12);
        const size_t m = index_of_port(static_cast<uint16_t>(master_port));
        if (m < kNodes && nodes_[m]->running()) {
          ok = false;
          last = "replica " + std::to_string(i) + " not in sync yet";
        }
      }
    }
    if (ok) return {};
    if (steady_clock::now() >= deadline) {
      return Status::deadline_exceeded("Redis Cluster not ok in time: " + last);
    }
    std::this_thread::sleep_for(milliseconds(50));  // waiting for a real cluster
  }
}

}  // namespace ratelimit::testing
