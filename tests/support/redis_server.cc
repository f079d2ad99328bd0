// redis_server.cc — test support: throwaway redis-server processes and a blocking client
// (see redis_server.h). Starts them with start_child (child_process.h: no shell, and they die
// with the test process); hiredis' blocking API; every wait is bounded in time.
#include "redis_server.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ratelimit/redis_store.h"

namespace ratelimit::testing {
namespace {

redisContext* ctx_of(void* p) { return static_cast<redisContext*>(p); }

Reply flatten(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = Reply::Type::kString; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.type = Reply::Type::kStatus; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.type = Reply::Type::kError; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.type = Reply::Type::kInteger; out.integer = r->integer; break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(flatten(r->element[i]));
      break;
    default: out.type = Reply::Type::kNil; break;
  }
  return out;
}

bool pings(uint16_t port) {
  timeval tv{0, 200'000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    redisSetTimeout(c, tv);
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    // Any answer means it is up: PONG, or NOAUTH from a server started with --requirepass.
    ok = r != nullptr && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR);
    if (r != nullptr) freeReplyObject(r);
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::string> make_temp_dir(const char* pattern) {
  std::string tmpl = (std::filesystem::temp_directory_path() / pattern).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Status::internal(std::string("mkdtemp: ") + std::strerror(errno));
  }
  return tmpl;
}

}  // namespace

TestCertificates::~TestCertificates() {
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Status TestCertificates::generate() {
  auto d = make_temp_dir("ratelimit-tls-XXXXXX");
  if (!d.ok()) return d.status();
  dir_ = *d;
  const std::chrono::milliseconds t(10000);
  auto key = [&](const std::string& name) {
    return run_program({"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-out", dir_ + "/" + name + ".key"}, t);
  };
  auto self_signed = [&](const std::string& name, const std::string& cn) {
    if (Status s = key(name); !s.is_ok()) return s;
    return run_program({"openssl", "req", "-x509", "-new", "-key", dir_ + "/" + name + ".key",
                        "-out", dir_ + "/" + name + ".crt", "-days", "2", "-subj", "/CN=" + cn},
                       t);
  };
  auto signed_by_ca = [&](const std::string& name, const std::string& cn,
                          const std::string& ext) {
    if (Status s = key(name); !s.is_ok()) return s;
    const std::string base = dir_ + "/" + name;
    if (Status s = run_program({"openssl", "req", "-new", "-key", base + ".key", "-out",
                                base + ".csr", "-subj", "/CN=" + cn}, t);
        !s.is_ok()) {
      return s;
    }
    std::ofstream(base + ".ext") << ext << "\n";
    return run_program({"openssl", "x509", "-req", "-in", base + ".csr", "-CA", ca_file(),
                        "-CAkey", dir_ + "/ca.key", "-CAcreateserial", "-out", base + ".crt",
                        "-days", "2", "-extfile", base + ".ext"}, t);
  };
  if (Status s = self_signed("ca", "ratelimit test CA"); !s.is_ok()) return s;
  if (Status s = self_signed("other-ca", "some other CA"); !s.is_ok()) return s;
  if (Status s = signed_by_ca("server", "localhost",
                              "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                              "extendedKeyUsage=serverAuth");
      !s.is_ok()) {
    return s;
  }
  return signed_by_ca("client", "ratelimit test client", "extendedKeyUsage=clientAuth");
}

std::optional<std::string> test_redis_url_from_env() {
  const char* v = std::getenv("RATELIMIT_TEST_REDIS_URL");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Result<uint16_t> free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  // NOLINTNEXTLINE: the sockets API takes sockaddr*.
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if (::bind(fd, sa, sizeof addr) != 0 || ::getsockname(fd, sa, &len) != 0) {
    int e = errno;
    ::close(fd);
    return Status::internal(std::string("bind/getsockname: ") + std::strerror(e));
  }
  ::close(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

RedisServer::~RedisServer() {
  kill();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string RedisServer::url() const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/0";
}

Status RedisServer::make_dir() {
  if (!dir_.empty()) return {};
  auto d = make_temp_dir("ratelimit-redis-XXXXXX");
  if (!d.ok()) return d.status();
  dir_ = *d;
  return {};
}

Status RedisServer::start(uint16_t port, std::vector<std::string> extra_args,
                          std::chrono::milliseconds timeout) {
  if (running()) return Status::internal("RedisServer::start: already running");
  if (port == 0) {
    auto p = free_loopback_port();
    if (!p.ok()) return p.status();
    port = *p;
  }
  port_ = port;
  extra_args_ = std::move(extra_args);
  if (Status s = make_dir(); !s.is_ok()) return s;
  return restart(timeout);
}

Status RedisServer::start_tls(const TestCertificates& certs, bool require_client_cert,
                              std::vector<std::string> extra_args) {
  auto p = free_loopback_port();
  if (!p.ok()) return p.status();
  tls_port_ = *p;
  std::vector<std::string> args = {"--tls-port", std::to_string(tls_port_),
                                   "--tls-cert-file", certs.server_cert(),
                                   "--tls-key-file", certs.server_key(),
                                   "--tls-ca-cert-file", certs.ca_file(),
                                   "--tls-auth-clients", require_client_cert ? "yes" : "no"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return start(0, std::move(args));
}

Status RedisServer::start_sentinel(uint16_t master_port, const std::string& master_name,
                                   int quorum) {
  if (running()) return Status::internal("RedisServer::start_sentinel: already running");
  auto p = free_loopback_port();
  if (!p.ok()) return p.status();
  port_ = *p;
  sentinel_ = true;
  if (Status s = make_dir(); !s.is_ok()) return s;
  // Sentinel rewrites its configuration file, so it must be its own writable file.
  std::ofstream conf(dir_ + "/sentinel.conf");
  conf << "sentinel monitor " << master_name << " 127.0.0.1 " << master_port << " " << quorum
       << "\nsentinel down-after-milliseconds " << master_name << " 1000\n"
       << "sentinel failover-timeout " << master_name << " 5000\n"
       << "sentinel parallel-syncs " << master_name << " 1\n";
  if (!conf) return Status::internal("cannot write " + dir_ + "/sentinel.conf");
  conf.close();
  return restart(std::chrono::milliseconds(5000));
}

Status RedisServer::restart(std::chrono::milliseconds timeout) {
  if (running()) return Status::internal("RedisServer::restart: still running (kill() first)");
  if (port_ == 0) return Status::internal("RedisServer::restart: never started");
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> args = {"redis-server", "--bind", "127.0.0.1",
                                   "--port", std::to_string(port_),
                                   "--save", "", "--appendonly", "no",
                                   "--dir", dir_, "--daemonize", "no",
                                   "--logfile", log, "--loglevel", "warning"};
  if (sentinel_) {
    args = {"redis-server", dir_ + "/sentinel.conf", "--sentinel", "--bind", "127.0.0.1",
            "--port", std::to_string(port_), "--dir", dir_, "--daemonize", "no",
            "--logfile", log, "--loglevel", "notice"};
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  auto pid = start_child(args);
  if (!pid.ok()) {
    return Status::unavailable("cannot start redis-server: " + pid.status().message() +
                               " (is redis-server installed? scripts/deps.sh installs it)");
  }
  pid_ = *pid;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pings(port_)) return {};
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken, bad argument...
      pid_ = -1;
      return Status::unavailable("redis-server exited at start-up on port " +
                                 std::to_string(port_) + ": " + read_file(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // waiting for a real server
  }
  kill();
  return Status::deadline_exceeded("redis-server on port " + std::to_string(port_) +
                                   " did not answer PING in time: " + read_file(log));
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  kill_child(pid_);
  pid_ = -1;
}

Result<std::string> shared_test_redis_url() {
  if (auto env = test_redis_url_from_env()) return *env;
  // Started once per test process; at exit the reaper destroys it: killed by pid and its
  // temporary directory removed (it only killed it before, and every test process run without
  // RATELIMIT_TEST_REDIS_URL left a ratelimit-redis-XXXXXX directory in /tmp: 745 in two hours
  // here). The reaper exists before the start, so a failed start is cleaned up too.
  static RedisServer* server = new RedisServer();
  static struct Reaper {
    ~Reaper() { delete server; }
  } reaper;
  static Status started = server->start();
  if (!started.is_ok()) return started;
  return server->url();
}

Result<RedisClient> RedisClient::connect(const std::string& url_text) {
  auto url = parse_redis_url(url_text);
  if (!url.ok()) return url.status();
  timeval tv{5, 0};
  redisContext* c = url->is_unix ? redisConnectUnixWithTimeout(url->path.c_str(), tv)
                                 : redisConnectWithTimeout(url->host.c_str(), url->port, tv);
  if (c == nullptr) return Status::unavailable("cannot allocate a Redis context");
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return Status::unavailable("cannot connect to " + url_text + ": " + why);
  }
  redisSetTimeout(c, tv);
  RedisClient client;
  client.ctx_ = c;
  if (url->has_password) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url->user.empty()) auth.push_back(url->user);
    auth.push_back(url->password);
    auto r = client.command(auth);
    if (!r.ok()) return r.status();
    if (r->is_error()) return Status::invalid_argument("AUTH refused: " + r->str);
  }
  if (url->db != 0) {
    auto r = client.command({"SELECT", std::to_string(url->db)});
    if (!r.ok()) return r.status();
    if (r->is_error()) return Status::invalid_argument("SELECT refused: " + r->str);
  }
  return client;
}

RedisClient::RedisClient(RedisClient&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }

RedisClient& RedisClient::operator=(RedisClient&& other) noexcept {
  if (this != &other) {
    if (ctx_ != nullptr) redisFree(ctx_of(ctx_));
    ctx_ = other.ctx_;
    other.ctx_ = nullptr;
  }
  return *this;
}

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_of(ctx_));
}

Result<Reply> RedisClient::command(const std::vector<std::string>& args) {
  if (ctx_ == nullptr) return Status::internal("RedisClient used after move");
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(ctx_of(ctx_), static_cast<int>(args.size()),
                                                      argv.data(), lens.data()));
  if (r == nullptr) {
    return Status::unavailable(std::string("Redis command failed: ") + ctx_of(ctx_)->errstr);
  }
  Reply out = flatten(r);
  freeReplyObject(r);
  return out;
}

}  // namespace ratelimit::testing
