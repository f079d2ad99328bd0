// daemon.cc — see daemon.h. Processes are started with start_child (child_process.h: stdout and
// stderr to a log file in a private temporary directory; they die with the test process) and
// stopped by pid only.
#include "daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <barrier>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>

#include "child_process.h"
#include "eventually.h"

namespace ratelimit::e2e {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string binary() { return std::string(RATELIMIT_BIN_DIR) + "/ratelimitd"; }

// ratelimitd as a child that dies with the test process (child_process.h), its stdout and
// stderr appended to `log_path`; -1 if it cannot be started.
pid_t spawn(const std::vector<std::string>& args, const std::string& log_path) {
  auto pid = testing::start_child(args, testing::ChildOutput{log_path, true});
  return pid.ok() ? *pid : -1;
}

// Waits for `pid` at most `timeout`: exit code, or -1 (still running or killed by a signal).
int wait_pid(pid_t& pid, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (pid > 0) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (std::chrono::steady_clock::now() >= end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

bool CaseLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
  });
}

boost::json::value Reply::json() const {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  return ec ? boost::json::value() : v;
}

Daemon::Daemon() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ratelimitd-e2e-XXXXXX").string();
  if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  config_path_ = dir_ + "/ratelimit.yaml";
  log_path_ = dir_ + "/ratelimitd.log";
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    wait_pid(pid_, std::chrono::seconds(5));
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void Daemon::rewrite_config(const std::string& yaml) {
  // Written beside and renamed, so a reload never reads half a file.
  const std::string tmp = config_path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << yaml;
  }
  std::filesystem::rename(tmp, config_path_);
}

bool Daemon::start(const std::string& yaml, const std::vector<std::string>& extra_args) {
  rewrite_config(yaml);
  std::vector<std::string> args = {binary(), "--config", config_path_, "--listen", "127.0.0.1:0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = spawn(args, log_path_);
  if (pid_ <= 0) return false;
  constexpr std::string_view kMarker = "listening on 127.0.0.1:";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    const std::string log_text = log();
    const size_t at = log_text.find(kMarker);
    if (at != std::string::npos) {
      port_ = static_cast<uint16_t>(std::atoi(log_text.c_str() + at + kMarker.size()));
      return port_ != 0;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int Daemon::run(const std::vector<std::string>& args, std::string& output) {
  Daemon scratch;  // for its temporary directory
  std::vector<std::string> full = {binary()};
  full.insert(full.end(), args.begin(), args.end());
  const std::string log_path = scratch.dir_ + "/run.log";
  pid_t pid = spawn(full, log_path);
  if (pid <= 0) return -1;
  const int rc = wait_pid(pid, std::chrono::seconds(10));
  if (pid > 0) {
    kill(pid, SIGKILL);
    wait_pid(pid, std::chrono::seconds(5));
  }
  output = read_file(log_path);
  return rc;
}

void Daemon::signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int Daemon::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_code_;
  return wait_pid(pid_, timeout);
}

std::string Daemon::log() const { return read_file(log_path_); }

bool Daemon::wait_log(std::string_view text, std::chrono::milliseconds timeout) const {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return log().find(text) != std::string::npos;
}

Client::Client(uint16_t port) : stream_(ioc_) {
  boost::system::error_code ec;
  stream_.expires_after(std::chrono::seconds(10));
  stream_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  connected_ = !ec;
}

Reply Client::request(std::string_view method, std::string_view target, std::string_view body,
                      const std::vector<std::pair<std::string, std::string>>& headers) {
  bhttp::request<bhttp::string_body> req;
  req.method_string(beast::string_view(method.data(), method.size()));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(bhttp::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST") {
    req.body() = std::string(body);
    req.set(bhttp::field::content_type, "application/json");
    req.prepare_payload();
  }
  boost::system::error_code ec;
  stream_.expires_after(std::chrono::seconds(10));
  bhttp::write(stream_, req, ec);
  if (ec) return {};
  return read_reply();
}

bool Client::send_raw(std::string_view bytes) {
  boost::system::error_code ec;
  stream_.expires_after(std::chrono::seconds(10));
  asio::write(stream_, asio::buffer(bytes.data(), bytes.size()), ec);
  return !ec;
}

bool Client::wait_read_by_server(std::chrono::milliseconds timeout) {
  boost::system::error_code ec;
  const auto local = stream_.socket().local_endpoint(ec);
  const auto remote = stream_.socket().remote_endpoint(ec);
  if (ec) return false;
  return read_by_server(local.port(), remote.port(), timeout);
}

bool read_by_server(uint16_t client_port, uint16_t server_port, std::chrono::milliseconds timeout) {
  // /proc/net/tcp names 127.0.0.1:port as 0100007F:PORT (hex) and has "tx_queue:rx_queue" in
  // field 5. Read when this end has nothing unacknowledged (the bytes reached the server's
  // socket) and the server's end has nothing left to read (its process took them).
  auto hex = [](uint16_t port) {
    char b[16];
    std::snprintf(b, sizeof b, "0100007F:%04X", port);
    return std::string(b);
  };
  const std::string server_end = hex(server_port), client_end = hex(client_port);
  return testing::eventually([&] {
    std::ifstream in("/proc/net/tcp");
    std::string line;
    std::getline(in, line);  // the header
    bool sent = false, taken = false;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, from, to, state, queues;
      fields >> sl >> from >> to >> state >> queues;
      if (from == client_end && to == server_end) sent = queues.substr(0, queues.find(':')) == "00000000";
      if (from == server_end && to == client_end) taken = queues.substr(queues.find(':') + 1) == "00000000";
    }
    return sent && taken;
  }, timeout, std::chrono::milliseconds(1));
}

Reply Client::read_reply(std::chrono::milliseconds timeout) {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(16 * 1024 * 1024);
  boost::system::error_code ec;
  stream_.expires_after(timeout);
  bhttp::read(stream_, buffer_, parser, ec);
  if (ec) return {};
  Reply r;
  const auto& res = parser.get();
  r.status = res.result_int();
  for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
  r.body = res.body();
  r.keep_alive = res.keep_alive();
  return r;
}

bool Client::wait_closed(std::chrono::milliseconds timeout) {
  char byte;
  boost::system::error_code ec;
  stream_.expires_after(timeout);
  while (true) {
    stream_.read_some(asio::buffer(&byte, 1), ec);
    if (ec == beast::error::timeout) return false;
    if (ec) return true;  // eof, reset
  }
}

Reply http_post(uint16_t port, std::string_view target, std::string_view body) {
  Client c(port);
  return c.post(target, body);
}

Reply http_get(uint16_t port, std::string_view target) {
  Client c(port);
  return c.get(target);
}

int64_t metric_in(const std::string& page, const std::string& name) {
  const std::string line = "\n" + name + " ";
  const size_t at = page.find(line);
  return at == std::string::npos ? -1 : std::stoll(page.substr(at + line.size()));
}

int64_t metric_value(uint16_t port, const std::string& name) { return metric_in(http_get(port, "/metrics").body, name); }

bool wait_metric(uint16_t port, const std::string& name, int64_t want, std::chrono::milliseconds timeout) {
  return testing::eventually([&] { return metric_value(port, name) >= want; }, timeout);
}

std::string lease_id(const Reply& r) {
  const boost::json::value v = r.json();
  if (!v.is_object() || !v.as_object().contains("lease_id") || !v.at("lease_id").is_string()) return "";
  return std::string(v.at("lease_id").as_string());
}

bool hold_and_release(Client& c, const Reply& granted, std::chrono::milliseconds hold, testing::HolderCount& holders) {
  holders.held();
  std::this_thread::sleep_for(hold);
  holders.releasing();
  const Reply rel = c.request("DELETE", "/v1/leases/" + lease_id(granted));
  return rel.status == 200 && rel.json().at("released").as_bool();
}

StatusCounts concurrent_acquires(const std::vector<uint16_t>& ports, const std::string& body,
                                 int clients, int per_client) {
  std::atomic<int> ok{0}, denied{0}, other{0};
  std::barrier sync(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      Client c(ports[static_cast<size_t>(i) % ports.size()]);
      sync.arrive_and_wait();
      for (int k = 0; k < per_client; ++k) {
        const unsigned status = c.post("/v1/acquire", body).status;
        (status == 200 ? ok : status == 429 ? denied : other)++;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {ok.load(), denied.load(), other.load()};
}

PairCounts concurrent_pairs_and_singles(const std::function<uint16_t(int)>& ports_for) {
  std::atomic<int> pair_ok{0}, single_ok{0}, errors{0};
  std::barrier sync(60);
  std::vector<std::thread> threads;
  for (int i = 0; i < 60; ++i) {
    threads.emplace_back([&, i] {
      Client c(ports_for(i));
      sync.arrive_and_wait();
      const bool pair = i % 2 == 0;
      const Reply r = c.post("/v1/acquire", pair ? R"({"key":"atom","policies":["a10","b15"]})"
                                                 : R"({"key":"atom","policy":"b15"})");
      if (r.status == 200) (pair ? pair_ok : single_ok)++;
      else if (r.status != 429) errors++;
    });
  }
  for (auto& t : threads) t.join();
  return {pair_ok.load(), single_ok.load(), errors.load()};
}

}  // namespace ratelimit::e2e
