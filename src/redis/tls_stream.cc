// tls_stream.cc — TLS byte streams on Boost.Asio SSL (see tls_stream.h for the contract).
#include "tls_stream.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace ratelimit::redis_detail {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

bool is_address(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// A precise message for a file the context cannot use (OpenSSL's own says little).
Status check_readable(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) {
    return Status::invalid_argument(std::string("tls.") + what + " '" + path +
                                    "' cannot be read: " + std::strerror(errno));
  }
  return {};
}

class TlsStream final : public ByteStream, public std::enable_shared_from_this<TlsStream> {
 public:
  TlsStream(asio::io_context& io, std::shared_ptr<ssl::context> ctx, const RedisTlsOptions& tls)
      : ctx_(std::move(ctx)),
        stream_(io, *ctx_),
        resolver_(io),
        verify_(tls.verify),
        server_name_(tls.server_name) {}

  void async_open(const Endpoint& to, const std::string& display, OpenHandler done) override {
    if (to.is_unix) {
      return done(Status::invalid_argument("TLS is for TCP connections, not a unix socket"));
    }
    const std::string name = server_name_.empty() ? to.host : server_name_;
    if (Status s = prepare(name); !s.is_ok()) return done(std::move(s));
    auto self = shared_from_this();
    resolver_.async_resolve(
        to.host, std::to_string(to.port),
        [self, display, host = to.host, done](const boost::system::error_code& ec,
                                              const asio::ip::tcp::resolver::results_type& r) {
          if (ec) return done(Status::unavailable("cannot resolve " + host + ": " + ec.message()));
          asio::async_connect(
              self->stream_.lowest_layer(), r,
              [self, display, done](const boost::system::error_code& e, const auto&) {
                if (e) return done(Status::unavailable("cannot connect to " + display + ": " +
                                                       e.message()));
                boost::system::error_code ignored;
                self->stream_.lowest_layer().set_option(asio::ip::tcp::no_delay(true), ignored);
                self->stream_.async_handshake(
                    ssl::stream_base::client,
                    [self, display, done](const boost::system::error_code& h) {
                      done(self->handshake_status(h, display));
                    });
              });
        });
  }

  void async_write(asio::const_buffer data, IoHandler done) override {
    asio::async_write(stream_, data,
                      [self = shared_from_this(), done = std::move(done)](
                          const boost::system::error_code& ec, size_t n) { done(ec, n); });
  }

  void async_read_some(asio::mutable_buffer into, IoHandler done) override {
    stream_.async_read_some(into, [self = shared_from_this(), done = std::move(done)](
                                      const boost::system::error_code& ec, size_t n) {
      done(ec, n);
    });
  }

  void close() override {
    // No TLS close_notify: the connection is being dropped (failure, timeout, shutdown) and
    // waiting for the peer's answer would only delay that.
    boost::system::error_code ignored;
    resolver_.cancel();
    stream_.lowest_layer().close(ignored);
  }

  bool has_unread_bytes() const override {
    // Decrypted bytes OpenSSL holds, or encrypted ones still in the kernel.
    auto& self = const_cast<ssl::stream<asio::ip::tcp::socket>&>(stream_);
    if (SSL_pending(self.native_handle()) > 0) return true;
    boost::system::error_code ec;
    return self.lowest_layer().is_open() && self.lowest_layer().available(ec) > 0 && !ec;
  }

 private:
  Status prepare(const std::string& name) {
    SSL* ssl = stream_.native_handle();
    const bool address = is_address(name);
    // SNI carries names only (RFC 6066 forbids addresses).
    // SSL_set_tlsext_host_name is a macro with a C cast; this is what it expands to.
    if (!address && SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                             const_cast<char*>(name.c_str())) != 1) {
      return Status::invalid_argument("TLS: cannot use '" + name + "' as the server name");
    }
    if (!verify_) {
      stream_.set_verify_mode(ssl::verify_none);
      return {};
    }
    stream_.set_verify_mode(ssl::verify_peer);
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int ok = address ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                           : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (ok != 1) return Status::invalid_argument("TLS: cannot verify against '" + name + "'");
    return {};
  }

  Status handshake_status(const boost::system::error_code& ec, const std::string& display) {
    if (!ec) return {};
    const long verify = SSL_get_verify_result(stream_.native_handle());
    if (verify_ && verify != X509_V_OK) {
      return Status::invalid_argument(
          "TLS: the certificate of " + display + " was refused: " +
          X509_verify_cert_error_string(verify) +
          " (check tls.ca_file and tls.server_name; the name checked is " +
          (server_name_.empty() ? "the URL's host" : "'" + server_name_ + "'") + ")");
    }
    return Status::unavailable("TLS handshake with " + display + " failed: " + ec.message() +
                               " (is it a TLS port?)");
  }

  std::shared_ptr<ssl::context> ctx_;  // before stream_: the stream uses it
  ssl::stream<asio::ip::tcp::socket> stream_;
  asio::ip::tcp::resolver resolver_;
  const bool verify_;
  const std::string server_name_;
};

}  // namespace

Result<StreamFactory> make_tls_stream_factory(const RedisTlsOptions& tls) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (!tls.ca_file.empty()) {
    if (Status s = check_readable(tls.ca_file, "ca_file"); !s.is_ok()) return s;
    ctx->load_verify_file(tls.ca_file, ec);
    if (ec) {
      return Status::invalid_argument("tls.ca_file '" + tls.ca_file +
                                      "' holds no usable PEM certificate: " + ec.message());
    }
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) return Status::invalid_argument("TLS: cannot load the system's CA certificates: " +
                                            ec.message());
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return Status::invalid_argument(
        "tls.cert_file and tls.key_file go together (a client certificate needs its key)");
  }
  if (!tls.cert_file.empty()) {
    if (Status s = check_readable(tls.cert_file, "cert_file"); !s.is_ok()) return s;
    if (Status s = check_readable(tls.key_file, "key_file"); !s.is_ok()) return s;
    ctx->use_certificate_chain_file(tls.cert_file, ec);
    if (ec) {
      return Status::invalid_argument("tls.cert_file '" + tls.cert_file +
                                      "' holds no usable PEM certificate: " + ec.message());
    }
    ctx->use_private_key_file(tls.key_file, ssl::context::pem, ec);
    if (ec) {
      // OpenSSL checks the key against the certificate here ("key values mismatch").
      return Status::invalid_argument("tls.key_file '" + tls.key_file +
                                      "' is not a usable PEM private key for tls.cert_file: " +
                                      ec.message());
    }
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      return Status::invalid_argument("tls.key_file '" + tls.key_file +
                                      "' is not the key of tls.cert_file '" + tls.cert_file + "'");
    }
  }
  return StreamFactory([ctx, tls](asio::io_context& io) -> std::shared_ptr<ByteStream> {
    return std::make_shared<TlsStream>(io, ctx, tls);
  });
}

}  // namespace ratelimit::redis_detail
