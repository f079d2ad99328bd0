// handler.h — the one interface between a transport (the HTTP/1.1 connection, an HTTP/2 stream)
// and the APIs ratelimitd serves (native /v1/*, forward-auth, Envoy's /json, ShouldRateLimit,
// health, readiness, metrics, admin). A transport turns bytes into an Exchange's Request, finds
// the Handler in its listener's RouteTable, and sends back the Exchange's Response; a Handler
// reads the Request and writes the Response. Neither knows the other's types: no socket, parser
// or Beast type appears here, no API type appears in a transport.
//
//   transport ── dispatch(routes, exchange) ──> Handler::handle(exchange) ── true: answered now
//      ^                                              │ false: answered later
//      └── post to own thread, complete(exchange) <── exchange.resume()  (any thread, once)
//
// Completion (the decision service's pattern, decision_service.h): handle() returns true when
// exchange.response is complete on return (the memory store answers inline: no hand-off, no
// allocation). Otherwise it returns false and arranges for exchange.resume() to be called exactly
// once, later, from any thread (typically a store thread); the transport then posts to its own
// thread and calls complete(exchange) there, which runs the handler's complete() to render, then
// sends. Until that send the Request's views stay valid and the Exchange is not reused.
// Per-exchange state: a handler keeps what it needs between handle() and complete() (a
// service::Pending, an rls::Call, a configuration snapshot) in Exchange::state<T>(), created on
// first use and reused by the next request of the same exchange — so a kept-alive connection
// allocates nothing per request, and a connection carries no field of any API.
// A transport that makes an Exchange per HTTP/2 stream should pool them per connection, so
// that this state too is reused rather than allocated per stream.
// Invariants: one request at a time per Exchange; the transport owns the Exchange and outlives
// any completion it started (it holds itself alive while a request is in flight).
// Thread-safety: a Handler is shared by every worker thread; handle() and complete() may run
// concurrently on distinct Exchanges. An Exchange is used by one thread at a time (its
// transport's), except resume(), which may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport_host.h"  // Endpoint (declared only: the transport carries it, never reads it)
#include "ratelimit/http.h"

namespace ratelimit::server {

enum class Method : uint8_t { kGet, kHead, kPost, kDelete, kOther };
enum class Protocol : uint8_t { kHttp1, kHttp2 };

// The header fields of one request as received, in order. Reused across requests: clear()
// keeps the capacity, so a kept-alive connection does not allocate per request. Lookups are
// ASCII case-insensitive (HTTP/2 names arrive lower case, HTTP/1.1 names as sent).
// Bounded by the transport (limits.max_header_bytes), not here.
class HeaderFields {
 public:
  void clear() {
    bytes_.clear();
    fields_.clear();
  }
  void add(std::string_view name, std::string_view value);

  // Where one field's name and value lie in a block of bytes.
  struct Field {
    uint32_t name_at, name_len, value_at, value_len;
  };
  // Replaces the fields with `fields`, in order, each a name and a value inside `block`: the
  // block is copied once (the HTTP/1.1 fast parse hands its head's field lines here, sparing a
  // copy per name and per value).
  void assign(std::string_view block, std::span<const Field> fields);

  // The value of the first field named `name`, or nullopt (a later duplicate is ignored: the
  // rule for Authorization and the forward-auth key header). Valid until the next add/clear.
  std::optional<std::string_view> first(std::string_view name) const;
  // Every field named `name`, joined by ", " in the order received (RFC 9110 §5.3: a list sent
  // as several fields is one list), into `out`. False (and `out` empty) when there is none.
  bool list(std::string_view name, std::string& out) const;
  size_t size() const { return fields_.size(); }
  // The same names and values, in the same order, byte for byte (the differential fuzz
  // target's check: however each was stored).
  bool operator==(const HeaderFields& other) const;

 private:
  std::string bytes_;
  std::vector<Field> fields_;
};

// Which listener accepted a request: set once at start-up, outlives every request.
struct ListenerInfo {
  std::string name;    // "HTTP", "admin", "debug", "Prometheus", "gRPC": for logs
  bool admin = false;  // admin_listen: operator endpoints only, connections counted apart
};

// What a handler reads of one request (views into the transport's buffers).
struct Request {
  Method method = Method::kOther;
  Protocol protocol = Protocol::kHttp1;
  std::string_view target;  // path and query (HTTP/2: :path)
  std::string_view body;    // complete (chunked coding removed; HTTP/2 DATA frames joined)
  const HeaderFields* headers = nullptr;  // never null while a handler runs
  std::string_view peer;                  // the client's IP address as text
  const ListenerInfo* listener = nullptr;  // never null while a handler runs

  std::string_view path() const { return target.substr(0, target.find('?')); }
  std::string_view query() const {
    const size_t q = target.find('?');
    return q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  }
};

// What a handler keeps with an exchange between requests (see top); destroyed with it.
class ExchangeState {
 public:
  virtual ~ExchangeState() = default;
};

class Handler;
class RouteTable;

// One handler-owned object kept with a transport's exchange (an Exchange here, a RespCall in
// resp_connection.h): of the type T the handler asks for, made from `owner` on first use and
// kept for the next request; replaced when a handler asks for another type.
template <typename Base>
class StateSlot {
 public:
  template <typename T, typename Owner>
  T& get(Owner& owner) {
    if (tag_ != &kTag<T>) {
      state_ = std::make_unique<T>(owner);
      tag_ = &kTag<T>;
    }
    return static_cast<T&>(*state_);
  }

 private:
  template <typename T>
  static inline const char kTag = 0;
  std::unique_ptr<Base> state_;
  const void* tag_ = nullptr;
};

// One request and its answer, owned by the transport (one per HTTP/1.1 connection, one per
// HTTP/2 stream). Not copyable or movable: completions hold its address.
class Exchange {
 public:
  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  virtual ~Exchange() = default;

  Request request;                    // filled by the transport before dispatch()
  http::Response response;            // filled by the handler
  std::vector<http::Field> trailers;  // sent after the body (HTTP/2: gRPC's grpc-status);
                                      // the HTTP/1.1 transport sends none
  Endpoint endpoint{};  // the metrics label: the route's (set by dispatch()), a handler may change it

  // Implemented by the transport: called exactly once, from any thread, after the handler's
  // handle() returned false and its answer may be rendered; the transport posts to its own
  // thread and calls complete(*this) there.
  virtual void resume() = 0;

  // The handler's state of type T (an ExchangeState constructed from this Exchange&), created
  // on first use, kept for the next request; replaced when a handler asks for another type.
  template <typename T>
  T& state() {
    return state_.get<T>(*this);
  }

 private:
  friend bool dispatch(const RouteTable& routes, Exchange& exchange);
  friend void complete(Exchange& exchange);
  friend void cancel(Exchange& exchange);
  Handler* handler_ = nullptr;  // the one dispatch() chose, until complete()
  StateSlot<ExchangeState> state_;
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Answers exchange.request into exchange.response (see top for the completion contract).
  // Must not throw; bad input is an answer (4xx), never an exception.
  virtual bool handle(Exchange& exchange) = 0;
  // Renders an answer that handle() left pending, on the transport's thread, after
  // exchange.resume(). Default: nothing (the answer was complete when resume() was called).
  virtual void complete(Exchange& /*exchange*/) {}
  // The client went away while handle()'s answer was pending (a transport that can tell, on its
  // thread): the handler may stop waiting for it. resume() must still come exactly once; the
  // answer is then discarded. Default: nothing (the answer comes when it comes).
  virtual void cancel(Exchange& /*exchange*/) {}
};

// A listener's paths and who answers them. Built once at start-up by the composition root and
// read-only afterwards (any thread). Lookup is in the order routes were added; the first match
// wins; a path no route matches goes to the fallback (which must be set before serving).
class RouteTable {
 public:
  struct Route {
    std::string path;
    bool subtree = false;  // also matches path + "/" + anything
    Handler* handler = nullptr;
    Endpoint endpoint{};
  };

  // `path` exactly (the query is not part of it).
  RouteTable& exact(std::string path, Handler& handler, Endpoint endpoint);
  // `path`, and every path below `path` + "/".
  RouteTable& subtree(std::string path, Handler& handler, Endpoint endpoint);
  // Everything else.
  RouteTable& fallback(Handler& handler, Endpoint endpoint = Endpoint{});

  const Route& find(std::string_view path) const;

 private:
  std::vector<Route> routes_;
  Route fallback_;
};

// Routes exchange.request by its path, sets exchange.endpoint to the route's, and calls the
// handler. Returns as Handler::handle (false: wait for exchange.resume(), then complete()).
bool dispatch(const RouteTable& routes, Exchange& exchange);
// On the transport's thread after exchange.resume(): the pending handler's complete().
void complete(Exchange& exchange);
// On the transport's thread while an answer is pending: the client went away (Handler::cancel).
void cancel(Exchange& exchange);

}  // namespace ratelimit::server
