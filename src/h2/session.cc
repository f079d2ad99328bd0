// session.cc — nghttp2's server session behind Session (see session.h). nghttp2 calls back
// into the static functions of Callbacks; each finds the Session in user_data and the Stream in
// the stream's user data. A Stream carries the request head and the response still to send.
#include "session.h"
#include "session_stream.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

namespace ratelimit::h2 {

const std::string* RequestHead::find(std::string_view name) const {
  for (const auto& [n, v] : fields) {
    if (n == name) return &v;
  }
  return nullptr;
}

void RequestHead::clear() {
  method.clear();
  scheme.clear();
  authority.clear();
  path.clear();
  content_type.clear();
  te.clear();
  grpc_timeout.clear();
  fields.clear();
  oversized = false;
}

namespace {

Session::Stream* stream_of(nghttp2_session* ng, int32_t id) {
  return static_cast<Session::Stream*>(nghttp2_session_get_stream_user_data(ng, id));
}

nghttp2_nv nv(std::string_view name, std::string_view value) {
  // nghttp2 copies names and values on submit (no NO_COPY flags).
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

struct Callbacks {
  static Session& self(void* user) { return *static_cast<Session*>(user); }

  static int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Session& s = self(user);
    Session::Stream* st = s.acquire_stream();
    st->reset(frame->hd.stream_id);
    if (nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, st) != 0) {
      s.release_stream(st);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_header(nghttp2_session* ng, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    Session::Stream* st = stream_of(ng, frame->hd.stream_id);
    if (st == nullptr) return 0;
    if (st->head_done) return 0;  // request trailers: not read by any API
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_bytes > self(user).limits_.max_header_bytes) {
      st->head.oversized = true;
      return 0;
    }
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    RequestHead& h = st->head;
    if (n == ":method") h.method.assign(v);
    else if (n == ":path") h.path.assign(v);
    else if (n == ":scheme") h.scheme.assign(v);
    else if (n == ":authority") h.authority.assign(v);
    else if (n == "content-type") h.content_type.assign(v);
    else if (n == "te") h.te.assign(v);
    else if (n == "grpc-timeout") h.grpc_timeout.assign(v);
    else h.fields.emplace_back(n, v);
    return 0;
  }

  static int on_frame_recv(nghttp2_session* ng, const nghttp2_frame* frame, void* user) {
    Session& s = self(user);
    const int32_t id = frame->hd.stream_id;
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS: {
        Session::Stream* st = stream_of(ng, id);
        if (st == nullptr) return 0;
        if (!st->head_done) {
          st->head_done = true;
          s.handler_.on_headers(s, id, st->head);
        }
        if (end) ended(s, ng, id);
        return 0;
      }
      case NGHTTP2_DATA:
        if (end) ended(s, ng, id);
        return 0;
      default:
        return 0;
    }
  }

  static void ended(Session& s, nghttp2_session* ng, int32_t id) {
    Session::Stream* st = stream_of(ng, id);
    if (st == nullptr || st->remote_ended) return;
    st->remote_ended = true;
    s.handler_.on_end(s, id);
  }

  static int on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    Session::Stream* st = stream_of(ng, id);
    if (st == nullptr) return 0;
    if (st->streaming) st->last_data_at = std::chrono::steady_clock::now();
    Session& s = self(user);
    s.handler_.on_data(s, id, std::string_view(reinterpret_cast<const char*>(data), len));
    return 0;
  }

  // A response ended (END_STREAM sent) while the peer is still sending: reset with NO_ERROR so
  // it stops (RFC 9113 §8.1), rather than holding the stream open for a body nobody reads.
  static int on_frame_send(nghttp2_session* ng, const nghttp2_frame* frame, void*) {
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 &&
        nghttp2_session_get_stream_remote_close(ng, frame->hd.stream_id) == 0) {
      nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session* ng, int32_t id, uint32_t error_code, void* user) {
    Session::Stream* st = stream_of(ng, id);
    if (st == nullptr) return 0;
    Session& s = self(user);
    nghttp2_session_set_stream_user_data(ng, id, nullptr);
    s.handler_.on_close(s, id, error_code);
    s.release_stream(st);
    return 0;
  }

  static ssize_t read_body(nghttp2_session* ng, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void* user) {
    auto* st = static_cast<Session::Stream*>(source->ptr);
    const size_t n = std::min(length, st->out.size() - st->out_off);
    if (n > 0) std::memcpy(buf, st->out.data() + st->out_off, n);
    st->out_off += n;
    self(user).held_ -= n;
    st->waiting_since = std::chrono::steady_clock::now();  // progress (or, below, its end)
    if (st->out_off < st->out.size()) return static_cast<ssize_t>(n);
    st->out.clear();
    st->out_off = 0;
    if (st->ending) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      st->eof_sent = true;
      if (st->has_trailers) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        std::vector<nghttp2_nv> nva;
        nva.reserve(st->trailers.size());
        for (const auto& [k, v] : st->trailers) nva.push_back(nv(k, v));
        if (nghttp2_submit_trailer(ng, id, nva.data(), nva.size()) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
      }
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      st->deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }
};

Session::Session(Handler& handler, const Limits& limits, FlowStats* stats)
    : handler_(handler), limits_(limits), stats_(stats) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, &Callbacks::on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Callbacks::on_stream_close);
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // Our own SETTINGS bound the peer from its first frame (it must not exceed them once
  // acknowledged; before that nghttp2 applies them to what it accepts already).
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  nghttp2_session_server_new2(&ng_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  const nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.initial_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_bytes},
  };
  nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
  // The connection's own window as large as a stream's, so one stream is never held back by it.
  if (limits_.initial_window > 65535) {
    nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0,
                                          static_cast<int32_t>(std::min<uint32_t>(limits_.initial_window * 4, 1u << 30)));
  }
}

Session::~Session() {
  close_streams();  // nghttp2_session_del does not call on_stream_close
  report_held();
  nghttp2_session_del(ng_);
}

void Session::close_streams() {
  while (!live_.empty()) {
    Stream* st = live_.back();
    nghttp2_session_set_stream_user_data(ng_, st->id, nullptr);
    handler_.on_close(*this, st->id, NGHTTP2_CANCEL);
    release_stream(st);
  }
}

bool Session::receive(std::string_view bytes) {
  if (fatal_) return false;
  const ssize_t n = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (n < 0) {
    // NGHTTP2_ERR_BAD_CLIENT_MAGIC, NGHTTP2_ERR_FLOODED, callback failure...: the connection
    // is done. A GOAWAY may already be queued (nghttp2 queues one for connection errors).
    fatal_ = true;
    if (n != NGHTTP2_ERR_BAD_CLIENT_MAGIC) nghttp2_session_terminate_session(ng_, NGHTTP2_PROTOCOL_ERROR);
    return false;
  }
  return true;
}

namespace {
// Appends every frame nghttp2 has ready; false on a fatal error.
bool send_all(nghttp2_session* ng, std::string& out, bool& any) {
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(ng, &data);
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    any = true;
  }
}
}  // namespace

bool Session::collect(std::string& out) {
  bool any = false;
  // What is left on the streams after nghttp2 took all the windows allow is held for the peer.
  bool ok = send_all(ng_, out, any);
  if (ok && held_ > limits_.max_held_bytes) {
    trim_held();
    ok = send_all(ng_, out, any);  // the resets, which release the streams' bytes
  }
  if (!ok) fatal_ = true;
  report_held();
  return any;
}

bool Session::alive() const {
  if (fatal_) return nghttp2_session_want_write(ng_) != 0;
  return nghttp2_session_want_read(ng_) != 0 || nghttp2_session_want_write(ng_) != 0;
}

size_t Session::open_streams() const { return live_.size(); }

Session::Stream* Session::stream(int32_t id) const { return stream_of(ng_, id); }

bool Session::is_open(int32_t id) const { return stream(id) != nullptr; }

Session::Stream* Session::acquire_stream() {
  Stream* s = nullptr;
  if (free_.empty()) {
    s = new Stream();
  } else {
    s = free_.back().release();
    free_.pop_back();
  }
  s->live_index = live_.size();
  live_.push_back(s);
  return s;
}

void Session::release_stream(Stream* s) {
  held_ -= s->unsent_bytes();  // an answer cut before it left
  live_[s->live_index] = live_.back();
  live_[s->live_index]->live_index = s->live_index;
  live_.pop_back();
  // Keep a few for reuse, with the capacity of a small answer's buffer (answers of the native
  // API and gRPC are well under it); a large one is given back, so what a connection keeps
  // after its streams closed stays small whatever it was sent.
  if (s->out.capacity() > 4 * 1024) std::string().swap(s->out);
  if (free_.size() < limits_.max_concurrent_streams) {
    free_.emplace_back(s);
  } else {
    delete s;
  }
}

void Session::respond(int32_t id, std::span<const Header> headers, bool end_stream) {
  Stream* st = stream(id);
  if (st == nullptr) return;
  nghttp2_nv nva[16];
  std::vector<nghttp2_nv> more;
  nghttp2_nv* p = nva;
  if (headers.size() > 16) {
    more.resize(headers.size());
    p = more.data();
  }
  for (size_t i = 0; i < headers.size(); ++i) p[i] = nv(headers[i].name, headers[i].value);
  if (end_stream) {
    nghttp2_submit_response(ng_, id, p, headers.size(), nullptr);
    return;
  }
  nghttp2_data_provider prd;
  prd.source.ptr = st;
  prd.read_callback = &Callbacks::read_body;
  st->answering = true;
  st->waiting_since = std::chrono::steady_clock::now();
  nghttp2_submit_response(ng_, id, p, headers.size(), &prd);
}

void Session::send_data(int32_t id, std::string_view bytes) {
  Stream* st = stream(id);
  if (st == nullptr || st->ending) return;
  if (!st->unsent()) st->waiting_since = std::chrono::steady_clock::now();
  st->out.append(bytes);
  held_ += bytes.size();
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(ng_, id);
  }
}

void Session::finish(int32_t id, std::span<const Header> trailers) {
  Stream* st = stream(id);
  if (st == nullptr || st->ending) return;
  if (!st->unsent()) st->waiting_since = std::chrono::steady_clock::now();
  st->ending = true;
  st->has_trailers = !trailers.empty();
  for (const Header& h : trailers) st->trailers.emplace_back(h.name, h.value);
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(ng_, id);
  }
}

void Session::reset(int32_t id, uint32_t error_code) {
  if (stream(id) == nullptr) return;
  nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, id, error_code);
}

void Session::shutdown_notice() { nghttp2_submit_shutdown_notice(ng_); }

void Session::go_away() {
  nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void Session::terminate(uint32_t error_code) { nghttp2_session_terminate_session(ng_, error_code); }

}  // namespace ratelimit::h2
