// http1_connection.h — one HTTP/1.1 connection of ratelimitd: reading requests (keep-alive and
// pipelining), handing each to its listener's RouteTable, writing the answers, timeouts, drain.
//
// What it does not know: any API. It fills an Exchange's Request (handler.h), calls dispatch(),
// and writes the Response; paths, bodies and statuses are the handlers'. It answers on its own
// only what never reaches a handler: a request it cannot frame (400, 413, 431; then closes).
// Lifecycle: idle (waiting for a request; idle_timeout, or first_byte_timeout before the first
// byte) -> reading (request_timeout from the first byte) -> handling (no deadline: the store's
// own timeouts bound it) -> writing (request_timeout) -> idle or closed. Draining: an idle
// connection closes at once, a busy one after its answer, sent with "Connection: close".
// Costs: the parser's buffers, the Exchange and the output buffer are reused, so a kept-alive
// connection serving small requests does not allocate per request, and an answer leaves in one
// write (head and body together).
// Thread-safety: runs on its worker's thread; resume() may be called from any thread.
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "transport.h"

namespace ratelimit::server {

// Serves a connection accepted by a listener (called on `worker`'s thread). The connection
// keeps itself alive while it has work; `served` and `worker` outlive it.
void serve_http1(Worker& worker, boost::asio::ip::tcp::socket socket, ConnectionSlot slot, const Served& served);

}  // namespace ratelimit::server
