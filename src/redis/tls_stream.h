// tls_stream.h — the TLS byte stream (rediss://, rediss-cluster://): TCP, then a TLS handshake
// that verifies the server's certificate chain against the configured CA and the server's name
// against the certificate, on Boost.Asio SSL over the system's OpenSSL.
//
// Why a factory around one shared ssl::context: loading the CA, the client certificate and its
// key happens once, when the store starts (so a missing or unreadable file is an error at
// start, kInvalidArgument naming the file), and every connection of every router (standalone,
// cluster, sentinel) shares the result; each connection attempt gets a fresh stream and
// session, as ByteStream requires.
// Invariants:
//   - verification is on unless the options say verify = false; then neither chain nor name is
//     checked (for tests against self-signed servers only);
//   - the name checked is options.server_name when set, else the endpoint's host (an address
//     is checked against the certificate's IP SANs, a name against its DNS SANs / CN); SNI is
//     sent for names, never for addresses;
//   - a handshake refused because of the certificate is kInvalidArgument with OpenSSL's reason
//     (a configuration error, reported at start); other failures are kUnavailable.
// Thread-safety: the factory may be called from any thread; each stream as in byte_stream.h.
#pragma once

#include "byte_stream.h"
#include "ratelimit/redis_store.h"

namespace ratelimit::redis_detail {

// A StreamFactory that opens TLS connections configured by `tls`, or the error (kInvalidArgument
// naming the file) when a CA, certificate or key cannot be loaded.
Result<StreamFactory> make_tls_stream_factory(const RedisTlsOptions& tls);

}  // namespace ratelimit::redis_detail
