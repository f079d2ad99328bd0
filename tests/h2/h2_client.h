// h2_client.h — an in-memory HTTP/2 client (nghttp2's client session) for driving an
// h2::Session with real frames and no socket: pump() moves bytes both ways until both sides
// are quiet. Responses are recorded per stream. SocketClient runs it over a real socket.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "session.h"

namespace ratelimit::h2::testing {

struct Response {
  std::map<std::string, std::string> headers, trailers;
  std::string body;
  bool closed = false;
  uint32_t close_code = 0;
  bool reset = false;  // RST_STREAM received
  uint32_t reset_code = 0;
};

class Client {
 public:
  Client() {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame);
    nghttp2_session_client_new(&ng_, cb, this);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~Client() { nghttp2_session_del(ng_); }

  // A request; `body` sent as DATA (END_STREAM after it unless keep_open).
  int32_t request(const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra = {},
                  const std::string& body = "", bool keep_open = false, const std::string& method = "POST") {
    std::vector<std::pair<std::string, std::string>> h = {
        {":method", method}, {":scheme", "http"}, {":authority", "test"}, {":path", path}};
    h.insert(h.end(), extra.begin(), extra.end());
    std::vector<nghttp2_nv> nva;
    for (auto& [k, v] : h) {
      nva.push_back({reinterpret_cast<uint8_t*>(k.data()), reinterpret_cast<uint8_t*>(v.data()), k.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    bodies_.push_back(std::make_unique<Body>(Body{body, 0, keep_open}));
    nghttp2_data_provider prd;
    prd.source.ptr = bodies_.back().get();
    prd.read_callback = &read_body;
    const bool no_body = body.empty() && !keep_open;
    const int32_t id = nghttp2_submit_request(ng_, nullptr, nva.data(), nva.size(), no_body ? nullptr : &prd, nullptr);
    if (keep_open) open_bodies_[id] = bodies_.back().get();
    return id;
  }
  // More body bytes on a stream requested with keep_open (a streaming call's next message).
  void send_more(int32_t id, const std::string& bytes) {
    open_bodies_.at(id)->data += bytes;
    nghttp2_session_resume_data(ng_, id);
  }

  // Moves bytes until neither side has anything to send. False when the server said the
  // connection is beyond repair.
  bool pump(Session& server, int rounds = 64) {
    bool ok = true;
    for (int i = 0; i < rounds; ++i) {
      std::string c2s;
      const uint8_t* p = nullptr;
      for (ssize_t n; (n = nghttp2_session_mem_send(ng_, &p)) > 0;) c2s.append(reinterpret_cast<const char*>(p), n);
      c2s = raw_ + c2s;
      raw_.clear();
      if (!c2s.empty() && !server.receive(c2s)) ok = false;
      std::string s2c;
      server.collect(s2c);
      if (!s2c.empty()) nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(s2c.data()), s2c.size());
      received_ += s2c.size();
      if (c2s.empty() && s2c.empty()) break;
    }
    return ok;
  }
  // Raw bytes sent before the client session's next output.
  void send_raw(std::string bytes) { raw_ += std::move(bytes); }

  nghttp2_session* ng() { return ng_; }
  std::map<int32_t, Response> responses;
  std::vector<uint32_t> goaways;
  size_t received_ = 0;

 private:
  struct Body {
    std::string data;
    size_t off;
    bool keep_open;
  };
  std::map<int32_t, Body*> open_bodies_;  // streams requested with keep_open
  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                           nghttp2_data_source* src, void*) {
    auto* b = static_cast<Body*>(src->ptr);
    const size_t n = std::min(len, b->data.size() - b->off);
    std::copy_n(b->data.data() + b->off, n, buf);
    b->off += n;
    if (b->off == b->data.size()) {
      if (b->keep_open) return n == 0 ? ssize_t{NGHTTP2_ERR_DEFERRED} : static_cast<ssize_t>(n);
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
  }
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl, const uint8_t* v,
                       size_t vl, uint8_t, void* u) {
    Response& r = static_cast<Client*>(u)->responses[f->hd.stream_id];
    auto& into = f->headers.cat == NGHTTP2_HCAT_HEADERS ? r.trailers : r.headers;
    into[std::string(reinterpret_cast<const char*>(n), nl)] = std::string(reinterpret_cast<const char*>(v), vl);
    return 0;
  }
  static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t n, void* u) {
    static_cast<Client*>(u)->responses[id].body.append(reinterpret_cast<const char*>(d), n);
    return 0;
  }
  static int on_close(nghttp2_session*, int32_t id, uint32_t code, void* u) {
    Response& r = static_cast<Client*>(u)->responses[id];
    r.closed = true;
    r.close_code = code;
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* f, void* u) {
    auto* c = static_cast<Client*>(u);
    if (f->hd.type == NGHTTP2_GOAWAY) c->goaways.push_back(f->goaway.error_code);
    if (f->hd.type == NGHTTP2_RST_STREAM) {
      c->responses[f->hd.stream_id].reset = true;
      c->responses[f->hd.stream_id].reset_code = f->rst_stream.error_code;
    }
    return 0;
  }
  nghttp2_session* ng_ = nullptr;
  std::vector<std::unique_ptr<Body>> bodies_;
  std::string raw_;
};

// The same client over a real loopback socket: until() reads and feeds it (bounded).
class SocketClient {
 public:
  explicit SocketClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~SocketClient() { close(fd_); }
  void send(std::string_view bytes) { ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size())); }
  // The client session's output (after the server closed, it is dropped: the peer is gone).
  void flush() {
    std::string out;
    const uint8_t* p = nullptr;
    for (ssize_t n; (n = nghttp2_session_mem_send(client.ng(), &p)) > 0;) out.append(reinterpret_cast<const char*>(p), n);
    if (!out.empty() && ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL) < 0) eof = true;
  }
  // Reads and feeds the client session until `done` or the timeout; false on timeout. Sets
  // `eof` when the server closed.
  template <typename F>
  bool until(F done, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    flush();
    while (!done()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[16384];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof = true;
        return done();
      }
      raw += std::string_view(buf, static_cast<size_t>(n));
      nghttp2_session_mem_recv(client.ng(), reinterpret_cast<const uint8_t*>(buf), static_cast<size_t>(n));
      flush();
    }
    return true;
  }
  int fd() const { return fd_; }
  Client client;
  std::string raw;
  bool eof = false;

 private:
  int fd_ = -1;
};

}  // namespace ratelimit::h2::testing
