// session_test.cc — h2::Session driven by nghttp2's client session in memory (h2_client.h):
// requests and responses with trailers, answers batched in one collect(), the stream budget,
// the header-size limit, early answers that reset the rest of a body, PING, graceful GOAWAY
// with streams in flight, half-open streams, streaming calls kept while they send, and hostile bytes (bad preface, bad frames, bad
// HPACK) answered with GOAWAY and the right error code.
#include "session.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <set>

#include "h2_client.h"

namespace ratelimit::h2 {
namespace {

using testing::Client;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Echoes each request's body back with a trailer; answers at the end of the request, or at its
// head when `early` (then the body is not read).
class Echo final : public Handler {
 public:
  bool early = false;
  bool hold = false;  // do not answer (the test answers)
  std::map<int32_t, std::string> bodies;
  std::map<int32_t, RequestHead> heads;
  std::set<int32_t> ended, closed;
  std::map<int32_t, uint32_t> close_codes;

  void on_headers(Session& s, int32_t id, const RequestHead& head) override {
    heads[id] = head;
    if (early && !hold) answer(s, id, "early");
  }
  void on_data(Session&, int32_t id, std::string_view b) override { bodies[id] += b; }
  void on_end(Session& s, int32_t id) override {
    ended.insert(id);
    if (!early && !hold) answer(s, id, bodies[id]);
  }
  void on_close(Session&, int32_t id, uint32_t code) override {
    closed.insert(id);
    close_codes[id] = code;
  }
  static void answer(Session& s, int32_t id, const std::string& body) {
    const Header h[] = {{":status", "200"}, {"content-type", "text/plain"}};
    s.respond(id, h, false);
    s.send_data(id, body);
    const Header t[] = {{"x-end", "yes"}};
    s.finish(id, t);
  }
};

TEST(H2Session, AnswersWithBodyAndTrailers) {
  Echo echo;
  Session server(echo, Limits{});
  Client c;
  const int32_t id = c.request("/x", {{"content-type", "text/plain"}, {"x-a", "1"}}, "hello");
  ASSERT_TRUE(c.pump(server));
  ASSERT_TRUE(c.responses[id].closed);
  EXPECT_EQ(c.responses[id].headers[":status"], "200");
  EXPECT_EQ(c.responses[id].body, "hello");
  EXPECT_EQ(c.responses[id].trailers["x-end"], "yes");
  EXPECT_EQ(echo.heads[id].path, "/x");
  EXPECT_EQ(echo.heads[id].method, "POST");
  EXPECT_EQ(echo.heads[id].content_type, "text/plain");
  ASSERT_NE(echo.heads[id].find("x-a"), nullptr);
  EXPECT_EQ(*echo.heads[id].find("x-a"), "1");
  EXPECT_TRUE(echo.closed.contains(id));
  EXPECT_EQ(server.open_streams(), 0U);
}

TEST(H2Session, AnswersOfOneReceiveLeaveInOneCollect) {
  Echo echo;
  Session server(echo, Limits{});
  Client c;
  ASSERT_TRUE(c.pump(server));  // settings exchanged
  std::vector<int32_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(c.request("/x", {}, "b" + std::to_string(i)));
  std::string c2s;
  const uint8_t* p = nullptr;
  for (ssize_t n; (n = nghttp2_session_mem_send(c.ng(), &p)) > 0;) c2s.append(reinterpret_cast<const char*>(p), n);
  ASSERT_TRUE(server.receive(c2s));
  std::string out;
  ASSERT_TRUE(server.collect(out));
  std::string more;
  EXPECT_FALSE(server.collect(more)) << "everything left in the first collect";
  nghttp2_session_mem_recv(c.ng(), reinterpret_cast<const uint8_t*>(out.data()), out.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(c.responses[ids[i]].body, "b" + std::to_string(i));
}

TEST(H2Session, StreamsBeyondTheBudgetAreRefused) {
  Echo echo;
  echo.hold = true;  // streams stay open
  Limits l;
  l.max_concurrent_streams = 4;
  Session server(echo, l);
  Client c;
  ASSERT_TRUE(c.pump(server));  // the client learns the limit...
  std::vector<int32_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(c.request("/x", {}, "", true));
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(server.open_streams(), 4U);
  // The client session itself queues the 5th until a stream closes: it honours the limit.
  const int32_t fifth = c.request("/x", {}, "", true);
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(server.open_streams(), 4U);
  EXPECT_FALSE(echo.heads.contains(fifth));
  Echo::answer(server, ids[0], "done");
  server.reset(ids[1], NGHTTP2_CANCEL);
  ASSERT_TRUE(c.pump(server));
  EXPECT_TRUE(echo.heads.contains(fifth));
}

// A peer that ignores SETTINGS_MAX_CONCURRENT_STREAMS: the excess is refused, the rest served.
TEST(H2Session, AHostileStreamFloodIsRefusedPerStream) {
  Echo echo;
  echo.hold = true;
  Limits l;
  l.max_concurrent_streams = 3;
  Session server(echo, l);
  // HEADERS frames built by hand: stream ids 1,3,...,19, each with the static-table-indexed
  // :method GET (0x82), :scheme http (0x86), :path / (0x84) and :authority "a" (0x41 0x01 'a').
  std::string in(kPreface);
  in += std::string("\0\0\0\x04\0\0\0\0\0", 9);  // empty SETTINGS
  for (uint32_t id = 1; id < 20; id += 2) {
    const char block[] = {'\x82', '\x86', '\x84', '\x41', '\x01', 'a'};
    const char hd[9] = {0, 0, static_cast<char>(sizeof block), 1, 0x4 /*END_HEADERS*/, 0, 0, 0, static_cast<char>(id)};
    in.append(hd, 9);
    in.append(block, sizeof block);
  }
  server.receive(in);
  EXPECT_LE(server.open_streams(), 3U);
  EXPECT_EQ(echo.heads.size(), 3U);
  std::string out;
  server.collect(out);
  EXPECT_FALSE(out.empty());
}

TEST(H2Session, OversizedHeadersAreFlaggedNotStored) {
  Echo echo;
  echo.hold = true;
  Limits l;
  l.max_header_bytes = 1024;
  Session server(echo, l);
  Client c;
  const int32_t id = c.request("/x", {{"x-big", std::string(4000, 'b')}});
  ASSERT_TRUE(c.pump(server));
  ASSERT_TRUE(echo.heads.contains(id));
  EXPECT_TRUE(echo.heads[id].oversized);
  EXPECT_EQ(echo.heads[id].find("x-big"), nullptr);
  const int32_t small = c.request("/y", {{"x-small", "s"}});
  ASSERT_TRUE(c.pump(server));
  EXPECT_FALSE(echo.heads[small].oversized);
}

TEST(H2Session, AnEarlyAnswerResetsTheRestOfTheBodyWithNoError) {
  Echo echo;
  echo.early = true;
  Session server(echo, Limits{});
  Client c;
  const int32_t id = c.request("/x", {}, "partial", true);  // the client keeps sending
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(c.responses[id].body, "early");
  EXPECT_TRUE(c.responses[id].closed);
  EXPECT_TRUE(c.responses[id].reset);
  EXPECT_EQ(c.responses[id].reset_code, static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_EQ(server.open_streams(), 0U);
}

TEST(H2Session, PingIsAnswered) {
  Echo echo;
  Session server(echo, Limits{});
  Client c;
  ASSERT_TRUE(c.pump(server));
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  nghttp2_submit_ping(c.ng(), NGHTTP2_FLAG_NONE, data);
  const size_t before = c.received_;
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(c.received_ - before, 17U);  // one PING ACK frame: 9 + 8 bytes
}

TEST(H2Session, GracefulGoawayAnswersStreamsInFlight) {
  Echo echo;
  echo.hold = true;
  Session server(echo, Limits{});
  Client c;
  const int32_t a = c.request("/a", {}, "x");
  ASSERT_TRUE(c.pump(server));
  server.shutdown_notice();
  server.go_away();
  ASSERT_TRUE(c.pump(server));
  ASSERT_FALSE(c.goaways.empty());
  EXPECT_EQ(c.goaways.back(), static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_TRUE(server.alive()) << "a stream is still open";
  Echo::answer(server, a, "late");
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(c.responses[a].body, "late");
  EXPECT_FALSE(server.alive());
}

TEST(H2Session, HalfOpenStreamsAreReset) {
  Echo echo;
  echo.hold = true;
  Session server(echo, Limits{});
  Client c;
  const int32_t open = c.request("/a", {}, "x", true);
  const int32_t done = c.request("/b", {}, "y");
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(server.reset_unfinished(std::chrono::steady_clock::now() + std::chrono::seconds(1)), 1U);
  ASSERT_TRUE(c.pump(server));
  EXPECT_TRUE(c.responses[open].reset);
  EXPECT_EQ(c.responses[open].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_TRUE(echo.closed.contains(open));
  EXPECT_FALSE(echo.closed.contains(done));
}

// A streaming call (gRPC bidirectional: RLQS) never ends its request: it is measured from its
// request's last bytes, so it lives while its client keeps sending and is reset once it stops.
TEST(H2Session, StreamingCallsLiveWhileTheirClientSends) {
  Echo echo;
  echo.hold = true;
  Session server(echo, Limits{});
  Client c;
  const int32_t call = c.request("/stream", {}, "first", true);
  const int32_t open = c.request("/a", {}, "x", true);
  ASSERT_TRUE(c.pump(server));
  server.set_streaming(call);
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  const auto before_more = std::chrono::steady_clock::now();
  // Opened before `later`: the plain half-open stream is due, the streaming one sent recently.
  EXPECT_EQ(server.reset_unfinished(later, before_more - std::chrono::seconds(1)), 1U);
  ASSERT_TRUE(c.pump(server));
  EXPECT_TRUE(c.responses[open].reset);
  EXPECT_FALSE(echo.closed.contains(call));
  // Its next message moves its clock past before_more: still kept.
  c.send_more(call, "second");
  ASSERT_TRUE(c.pump(server));
  EXPECT_EQ(echo.bodies[call], "firstsecond");
  EXPECT_EQ(server.reset_unfinished(later, before_more), 0U);
  // Nothing more after `later`: reset (CANCEL).
  EXPECT_EQ(server.reset_unfinished(later, later), 1U);
  ASSERT_TRUE(c.pump(server));
  EXPECT_TRUE(c.responses[call].reset);
  EXPECT_EQ(c.responses[call].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
}

// A client that announces a stream window of 0 (and never updates it) gets the heads of its
// answers, and the bodies wait: held, counted, and reset (CANCEL) once they made no progress
// for the timeout — every stream then stalled, which the connection turns into GOAWAY.
void close_the_windows(Client& c) {
  const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}};
  EXPECT_EQ(nghttp2_submit_settings(c.ng(), NGHTTP2_FLAG_NONE, iv, 1), 0);
}

TEST(H2Session, AnswersHeldByAClosedWindowAreCountedThenReset) {
  Echo echo;
  FlowStats stats;
  Session server(echo, Limits{}, &stats);
  Client c;
  close_the_windows(c);
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(c.request("/a", {}, std::string(1000, 'x')));
  ASSERT_TRUE(c.pump(server));
  for (int32_t id : ids) EXPECT_EQ(c.responses[id].headers[":status"], "200");
  EXPECT_EQ(server.held_bytes(), 3000U);
  EXPECT_EQ(stats.held_bytes.load(), 3000);
  bool every = false;
  EXPECT_EQ(server.reset_stalled(std::chrono::steady_clock::now() - std::chrono::seconds(1), every), 0U)
      << "not before the timeout";
  EXPECT_EQ(server.reset_stalled(std::chrono::steady_clock::now() + std::chrono::seconds(1), every), 3U);
  EXPECT_TRUE(every);
  ASSERT_TRUE(c.pump(server));
  for (int32_t id : ids) {
    EXPECT_TRUE(c.responses[id].reset);
    EXPECT_EQ(c.responses[id].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
    EXPECT_TRUE(c.responses[id].body.empty());
  }
  EXPECT_EQ(server.held_bytes(), 0U);
  EXPECT_EQ(stats.held_bytes.load(), 0);
  EXPECT_EQ(stats.stalled_streams_reset.load(), 3U);
}

// A stream still waiting for its handler's answer is not stalled: the connection is not ended
// for the others.
TEST(H2Session, AStreamAwaitingItsAnswerIsNotStalled) {
  Echo echo;
  Session server(echo, Limits{});
  Client c;
  close_the_windows(c);
  echo.hold = true;
  const int32_t waiting = c.request("/w", {}, "w");
  const int32_t held = c.request("/h", {}, "h");
  ASSERT_TRUE(c.pump(server));
  Echo::answer(server, held, "held by the window");
  ASSERT_TRUE(c.pump(server));
  bool every = true;
  EXPECT_EQ(server.reset_stalled(std::chrono::steady_clock::now() + std::chrono::seconds(1), every), 1U);
  EXPECT_FALSE(every);
  ASSERT_TRUE(c.pump(server));
  EXPECT_TRUE(c.responses[held].reset);
  EXPECT_FALSE(c.responses[waiting].closed);
}

// Beyond Limits::max_held_bytes, the streams holding the most are reset after the collect()
// that found them held, until what is left fits.
TEST(H2Session, HeldBytesBeyondTheCapResetTheLargestAnswers) {
  Echo echo;
  FlowStats stats;
  Limits limits;
  limits.max_held_bytes = 5000;
  Session server(echo, limits, &stats);
  Client c;
  close_the_windows(c);
  const int32_t a = c.request("/a", {}, std::string(3000, 'a'));
  const int32_t b = c.request("/b", {}, std::string(1000, 'b'));
  const int32_t d = c.request("/d", {}, std::string(3000, 'd'));
  ASSERT_TRUE(c.pump(server));
  EXPECT_LE(server.held_bytes(), 5000U);
  EXPECT_EQ(stats.held_streams_reset.load(), 1U);
  EXPECT_NE(c.responses[a].reset, c.responses[d].reset) << "one of the two largest";
  EXPECT_FALSE(c.responses[b].reset);
  EXPECT_EQ(stats.held_bytes.load(), static_cast<int64_t>(server.held_bytes()));
}

TEST(H2Session, ABadPrefaceEndsTheConnection) {
  Echo echo;
  Session server(echo, Limits{});
  EXPECT_FALSE(server.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string out;
  server.collect(out);
  EXPECT_FALSE(server.alive());
}

// Feeds `frames` after the preface and an empty SETTINGS; returns the GOAWAY error code the
// server sent (or -1).
int64_t goaway_after(const std::string& frames) {
  Echo echo;
  Session server(echo, Limits{});
  Client c;
  std::string in(kPreface);
  in += std::string("\0\0\0\x04\0\0\0\0\0", 9);
  in += frames;
  server.receive(in);
  std::string out;
  server.collect(out);
  // Find the GOAWAY frame in the output (type 7): error code at payload offset 4.
  for (size_t i = 0; i + 9 <= out.size();) {
    const size_t len = static_cast<unsigned char>(out[i]) << 16 | static_cast<unsigned char>(out[i + 1]) << 8 |
                       static_cast<unsigned char>(out[i + 2]);
    if (out[i + 3] == 7 && len >= 8) {
      const auto* p = reinterpret_cast<const unsigned char*>(out.data() + i + 9 + 4);
      return int64_t{p[0]} << 24 | p[1] << 16 | p[2] << 8 | p[3];
    }
    i += 9 + len;
  }
  return -1;
}

TEST(H2Session, BadFramesGetGoawayWithTheRightCode) {
  // DATA on stream 0: PROTOCOL_ERROR.
  EXPECT_EQ(goaway_after(std::string("\0\0\x01\0\0\0\0\0\0x", 10)), NGHTTP2_PROTOCOL_ERROR);
  // A SETTINGS frame whose length is not a multiple of 6: FRAME_SIZE_ERROR.
  EXPECT_EQ(goaway_after(std::string("\0\0\x05\x04\0\0\0\0\0abcde", 14)), NGHTTP2_FRAME_SIZE_ERROR);
  // A frame larger than the default SETTINGS_MAX_FRAME_SIZE (16384): FRAME_SIZE_ERROR.
  EXPECT_EQ(goaway_after(std::string("\0\x50\0\0\0\0\0\0\x01", 9) + std::string(0x5000, 'x')),
            NGHTTP2_FRAME_SIZE_ERROR);
  // HEADERS whose block is not valid HPACK (index 0 is invalid): COMPRESSION_ERROR.
  EXPECT_EQ(goaway_after(std::string("\0\0\x01\x01\x05\0\0\0\x01\x80", 10)), NGHTTP2_COMPRESSION_ERROR);
  // WINDOW_UPDATE with increment 0 on the connection: PROTOCOL_ERROR.
  EXPECT_EQ(goaway_after(std::string("\0\0\x04\x08\0\0\0\0\0\0\0\0\0", 13)), NGHTTP2_PROTOCOL_ERROR);
}

TEST(H2Session, RequestsMissingPseudoHeadersAreResetNotServed) {
  Echo echo;
  Session server(echo, Limits{});
  std::string in(kPreface);
  in += std::string("\0\0\0\x04\0\0\0\0\0", 9);
  // HEADERS (END_STREAM|END_HEADERS) with only :method GET: no :path, :scheme.
  in += std::string("\0\0\x01\x01\x05\0\0\0\x01\x82", 10);
  server.receive(in);
  EXPECT_TRUE(echo.heads.empty());
  std::string out;
  server.collect(out);
  EXPECT_NE(out.find(std::string("\x03\0\0\0\0\x01", 6)), std::string::npos) << "RST_STREAM on stream 1";
}

}  // namespace
}  // namespace ratelimit::h2
