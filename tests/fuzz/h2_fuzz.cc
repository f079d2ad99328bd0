// h2_fuzz.cc — libFuzzer target for the HTTP/2 transport and the gRPC wire: the input, after
// the client preface, is fed to an h2::Session in up to three chunks (frames, HPACK, flow
// control, stream state — nghttp2 under our callbacks); every stream's head, body and end go
// through what the gRPC handler uses (grpc-timeout, message framing) and each ended stream is
// answered with a body and trailers, so our send path runs too. Built by scripts/fuzz with
// clang (-fsanitize=fuzzer,address,undefined); built by CMake with a corpus-replay main.
// Invariants beyond "no crash": never more open streams than SETTINGS_MAX_CONCURRENT_STREAMS
// (plus the stream being refused), a stream is closed at most once, and no callback names a
// stream after its close.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "grpc_wire.h"
#include "session.h"

namespace {

using namespace ratelimit;

class Answering final : public h2::Handler {
 public:
  std::set<int32_t> open, closed;
  std::map<int32_t, grpc_api::MessageReader> readers;

  void on_headers(h2::Session&, int32_t id, const h2::RequestHead& head) override {
    if (closed.contains(id)) std::abort();
    open.insert(id);
    (void)grpc_api::parse_timeout(head.grpc_timeout);
    readers[id].reset(64 * 1024);
  }
  void on_data(h2::Session&, int32_t id, std::string_view bytes) override {
    if (closed.contains(id)) std::abort();
    auto& r = readers[id];
    r.feed(bytes);
    while (auto m = r.next()) {
      if (m->size() > 64 * 1024) std::abort();
    }
  }
  void on_end(h2::Session& s, int32_t id) override {
    if (closed.contains(id)) std::abort();
    const h2::Header h[] = {{":status", "200"}, {"content-type", "application/grpc"}};
    s.respond(id, h, false);
    s.send_data(id, std::string(5 + (id % 7), 'x'));
    const h2::Header t[] = {{"grpc-status", "0"}};
    s.finish(id, t);
  }
  void on_close(h2::Session&, int32_t id, uint32_t) override {
    if (!closed.insert(id).second) std::abort();
    open.erase(id);
    readers.erase(id);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Answering handler;
  h2::Limits limits;
  limits.max_concurrent_streams = 8;
  limits.max_header_bytes = 2048;
  {
    h2::Session session(handler, limits);
    std::string out;
    session.collect(out);
    bool ok = session.receive("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    const size_t a = size / 3, b = 2 * size / 3;
    for (std::string_view part : {in.substr(0, a), in.substr(a, b - a), in.substr(b)}) {
      if (!ok) break;
      ok = session.receive(part);
      out.clear();
      session.collect(out);
      if (session.open_streams() > limits.max_concurrent_streams + 1) std::abort();
    }
    (void)session.reset_unfinished(std::chrono::steady_clock::now());
    out.clear();
    session.collect(out);
  }
  if (!handler.open.empty()) std::abort();  // the Session's end closed every stream
  return 0;
}
