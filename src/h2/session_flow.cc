// session_flow.cc — what h2::Session does about streams its peer does not let finish (see
// session.h's bounds): requests that never end (reset_unfinished), answers the peer's
// flow-control windows hold back past the request timeout (reset_stalled) or beyond
// Limits::max_held_bytes (trim_held, after each collect()), and the held bytes reported to
// FlowStats. Why: an answer waits in its stream's buffer until the peer's WINDOW_UPDATE lets it
// out; a peer that announces a window of 0 and never updates it would otherwise hold every
// answer's bytes, and the stream, for as long as it keeps the connection.
// Invariant: held_ is the sum of the live streams' unsent_bytes() (send_data adds, read_body and
// release_stream take away); a stream is reset at most once (`cut`).
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <vector>

#include "session.h"
#include "session_stream.h"

namespace ratelimit::h2 {

void Session::set_streaming(int32_t id) {
  if (Stream* st = stream(id)) {
    st->streaming = true;
    st->last_data_at = std::chrono::steady_clock::now();
  }
}

size_t Session::reset_unfinished(std::chrono::steady_clock::time_point cutoff,
                                 std::chrono::steady_clock::time_point streaming_cutoff) {
  size_t n = 0;
  for (Stream* st : live_) {
    const bool due = st->streaming ? st->last_data_at < streaming_cutoff : st->opened_at < cutoff;
    if (!st->remote_ended && due) {
      nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
      st->remote_ended = true;  // reset once: it closes when the RST_STREAM is sent
      ++n;
    }
  }
  return n;
}

size_t Session::reset_stalled(std::chrono::steady_clock::time_point cutoff, bool& every_stream_stalled) {
  size_t n = 0;
  every_stream_stalled = !live_.empty();
  const int32_t connection_window = nghttp2_session_get_remote_window_size(ng_);
  for (Stream* st : live_) {
    if (st->cut) continue;
    if (st->unsent() && st->waiting_since < cutoff) {
      nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
      st->cut = true;
      ++n;
      continue;
    }
    const int32_t window = std::min(nghttp2_session_get_stream_remote_window_size(ng_, st->id), connection_window);
    if (!st->unsent() || window > 0) every_stream_stalled = false;
  }
  if (n > 0 && every_stream_stalled) {
    // The connection ends: the streams the window holds that were not yet due are reset too,
    // so that every stream hears RST_STREAM before the GOAWAY.
    for (Stream* st : live_) {
      if (st->cut) continue;
      nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
      st->cut = true;
      ++n;
    }
  }
  if (stats_ != nullptr && n > 0) stats_->stalled_streams_reset.fetch_add(n, std::memory_order_relaxed);
  return n;
}

void Session::trim_held() {
  std::vector<Stream*> holding;
  for (Stream* st : live_) {
    if (!st->cut && st->unsent_bytes() > 0) holding.push_back(st);
  }
  std::sort(holding.begin(), holding.end(),
            [](const Stream* a, const Stream* b) { return a->unsent_bytes() > b->unsent_bytes(); });
  size_t kept = held_;
  for (Stream* st : holding) {
    if (kept <= limits_.max_held_bytes) break;
    kept -= st->unsent_bytes();
    st->cut = true;
    nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    if (stats_ != nullptr) stats_->held_streams_reset.fetch_add(1, std::memory_order_relaxed);
  }
}

void Session::report_held() {
  if (stats_ == nullptr) return;
  const auto now = static_cast<int64_t>(held_);
  if (now != held_reported_) stats_->held_bytes.fetch_add(now - held_reported_, std::memory_order_relaxed);
  held_reported_ = now;
}

}  // namespace ratelimit::h2
