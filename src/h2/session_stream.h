// session_stream.h — one HTTP/2 stream's state inside h2::Session (private to src/h2): the
// request head as received and the answer still to send, with what flow control needs to know
// of it (session_flow.cc). Reused across a connection's streams (reset()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "session.h"

namespace ratelimit::h2 {

struct Session::Stream {
  int32_t id = 0;
  size_t live_index = 0;  // position in Session::live_
  RequestHead head;
  size_t header_bytes = 0;
  bool head_done = false;   // on_headers was called
  bool remote_ended = false;  // on_end was called
  std::chrono::steady_clock::time_point opened_at;
  // A streaming call (Session::set_streaming): its request's last bytes arrived at last_data_at.
  bool streaming = false;
  std::chrono::steady_clock::time_point last_data_at;
  // The response body still to send (from `out_off`), and how it ends.
  std::string out;
  size_t out_off = 0;
  bool ending = false;      // finish() was called
  bool deferred = false;    // the data source said DEFERRED: resume on more data
  bool has_trailers = false;
  std::vector<std::pair<std::string, std::string>> trailers;
  // Flow control: an answer with a body is `answering` from respond() until its end left
  // (eof_sent); `waiting_since` is when its waiting bytes last moved (or began to wait); `cut`
  // once the session reset it.
  bool answering = false;
  bool eof_sent = false;
  bool cut = false;
  std::chrono::steady_clock::time_point waiting_since;

  size_t unsent_bytes() const { return out.size() - out_off; }
  // Bytes or the end of the answer wait to be sent (not: the handler has not answered yet).
  bool unsent() const { return answering && !eof_sent && (unsent_bytes() > 0 || ending); }

  void reset(int32_t stream_id) {
    id = stream_id;
    head.clear();
    header_bytes = 0;
    head_done = false;
    remote_ended = false;
    opened_at = std::chrono::steady_clock::now();
    streaming = false;
    last_data_at = opened_at;
    out.clear();
    out_off = 0;
    ending = deferred = has_trailers = false;
    trailers.clear();
    answering = eof_sent = cut = false;
  }
};

}  // namespace ratelimit::h2
