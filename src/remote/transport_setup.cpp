// Making connections (transport.hpp): TLS contexts, async_connect and listener.

#include <openssl/ssl.h>

#include <mutex>
#include <string>
#include <utility>

#include "remote/stream_connection.hpp"

namespace akt::remote::detail {

namespace {

// Bounds how fast the accept loop spins when accept keeps failing (out of descriptors): the
// loop waits this long before the next accept instead of retrying at once.
constexpr std::chrono::milliseconds k_accept_retry_delay{100};

error file_error(const char* what, const std::string& file, const std::error_code& ec) {
  return error(errc::invalid_argument,
               std::string("cannot load the TLS ") + what + " '" + file + "': " + ec.message());
}

// A TLS 1.3 context for one side, loaded from the settings' PEM files.
result<std::shared_ptr<asio::ssl::context>> make_tls_context(const tls_settings& s, bool server) {
  if (server && (s.certificate_file.empty() || s.private_key_file.empty())) {
    return error(errc::invalid_argument,
                 "a TLS listener needs certificate_file and private_key_file");
  }
  if (server && s.require_peer_certificate && s.ca_file.empty()) {
    return error(errc::invalid_argument, "mutual TLS needs ca_file to check clients against");
  }
  if (s.certificate_file.empty() != s.private_key_file.empty()) {
    return error(errc::invalid_argument, "certificate_file and private_key_file go together");
  }
  std::shared_ptr<asio::ssl::context> ctx;
  try {
    ctx = std::make_shared<asio::ssl::context>(server ? asio::ssl::context::tls_server
                                                      : asio::ssl::context::tls_client);
  } catch (const std::system_error& e) {
    return error(errc::invalid_argument, std::string("cannot create a TLS context: ") + e.what());
  }
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  std::error_code ec;
  if (!s.certificate_file.empty()) {
    ctx->use_certificate_chain_file(s.certificate_file, ec);
    if (ec) return file_error("certificate", s.certificate_file, ec);
    ctx->use_private_key_file(s.private_key_file, asio::ssl::context::pem, ec);
    if (ec) return file_error("private key", s.private_key_file, ec);
    if (SSL_CTX_check_private_key(native) != 1) {
      return error(errc::invalid_argument, "the TLS private key '" + s.private_key_file +
                                               "' does not match the certificate '" +
                                               s.certificate_file + "'");
    }
  }
  if (!s.ca_file.empty()) {
    ctx->load_verify_file(s.ca_file, ec);
    if (ec) return file_error("CA file", s.ca_file, ec);
  } else if (!server) {
    ctx->set_default_verify_paths(ec);
    if (ec) return error(errc::invalid_argument, "cannot load the system's CAs: " + ec.message());
  }
  if (server) {
    ctx->set_verify_mode(s.require_peer_certificate
                             ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                             : asio::ssl::verify_none);
    // Connections are long-lived and never resumed: session tickets would be bytes for nothing.
    SSL_CTX_set_num_tickets(native, 0);
  } else {
    ctx->set_verify_mode(asio::ssl::verify_peer);
  }
  return ctx;
}

void set_no_delay(tcp::socket& s) {
  std::error_code ignored;  // a socket that cannot take it still works, only slower
  s.set_option(tcp::no_delay(true), ignored);
}

// One async_connect: resolve, connect, handshake, all on one strand, bounded by one timer.
// Contract: created and started by async_connect; every member is touched on the strand only;
// done is called exactly once (finished_), then the timer is cancelled.
struct connect_op : std::enable_shared_from_this<connect_op> {
  connect_op(io_pool& io, std::string h, std::uint16_t p, const io_limits& l,
             std::chrono::milliseconds t,
             std::function<void(result<std::shared_ptr<connection>>)> d)
      : strand(asio::make_strand(io.context())),
        resolver(strand),
        timer(strand),
        socket(strand),
        host(std::move(h)),
        port(p),
        limits(l),
        timeout(t),
        done(std::move(d)) {}

  asio::strand<asio::io_context::executor_type> strand;
  tcp::resolver resolver;
  asio::steady_timer timer;
  tcp::socket socket;  // until the connection takes it
  std::shared_ptr<stream_connection> conn;
  std::shared_ptr<asio::ssl::context> tls;  // empty: plain TCP
  bool verify_name = false;
  std::string host;
  std::uint16_t port;
  io_limits limits;
  std::chrono::milliseconds timeout;
  std::function<void(result<std::shared_ptr<connection>>)> done;
  bool finished = false;
  bool timed_out = false;

  std::string where() const { return host + ":" + std::to_string(port); }

  void start() {
    timer.expires_after(timeout);
    timer.async_wait([self = shared_from_this()](const std::error_code& ec) {
      if (ec || self->finished) return;
      self->timed_out = true;  // every pending step fails with operation_aborted now
      self->resolver.cancel();
      std::error_code ignored;
      self->socket.close(ignored);
      if (self->conn) self->conn->abort_socket();
    });
    resolver.async_resolve(
        host, std::to_string(port),
        [self = shared_from_this()](const std::error_code& ec, tcp::resolver::results_type r) {
          self->on_resolved(ec, std::move(r));
        });
  }

  void on_resolved(const std::error_code& ec, tcp::resolver::results_type endpoints) {
    if (finished) return;
    if (ec) return fail(errc::unreachable, "cannot resolve '" + host + "': " + ec.message());
    asio::async_connect(
        socket, endpoints,
        [self = shared_from_this()](const std::error_code& ec, const tcp::endpoint&) {
          self->on_connected(ec);
        });
  }

  void on_connected(const std::error_code& ec) {
    if (finished) return;
    if (ec) return fail(errc::unreachable, "cannot connect to " + where() + ": " + ec.message());
    set_no_delay(socket);
    if (!tls) {
      conn = std::make_shared<stream_connection>(std::move(socket), limits);
      return succeed();
    }
    conn = std::make_shared<stream_connection>(std::move(socket), tls, limits);
    conn->handshake_client(host, verify_name, [self = shared_from_this()](error e) {
      if (self->finished) return;
      if (e) return self->fail(e.code(), std::string(e.detail()));
      self->succeed();
    });
  }

  void fail(errc code, std::string detail) {
    if (timed_out) {
      code = errc::unreachable;
      detail = "no connection to " + where() + " within " + std::to_string(timeout.count()) + " ms";
    }
    finished = true;
    timer.cancel();
    if (conn) conn->abort_socket();
    done(error(code, std::move(detail)));
  }

  void succeed() {
    finished = true;
    timer.cancel();
    done(std::shared_ptr<connection>(std::move(conn)));
  }
};

}  // namespace

void async_connect(io_pool& io, std::string host, std::uint16_t port, const tls_settings& tls,
                   const io_limits& limits, std::chrono::milliseconds timeout,
                   std::function<void(result<std::shared_ptr<connection>>)> done) {
  auto op =
      std::make_shared<connect_op>(io, std::move(host), port, limits, timeout, std::move(done));
  if (tls.enabled) {
    auto ctx = make_tls_context(tls, false);
    if (!ctx) {  // reported on an I/O thread like every other outcome
      asio::post(op->strand, [op, e = ctx.error()] {
        op->finished = true;
        op->done(e);
      });
      return;
    }
    op->tls = std::move(*ctx);
    op->verify_name = tls.verify_peer_name;
  }
  asio::post(op->strand, [op] { op->start(); });
}

// ---- listener ----

// The accept loop's state, shared by the listener and its pending completions.
// Contract: the acceptor and the retry timer are touched on the acceptor's strand only;
// `closed` is guarded by callback_mutex, which is also held around every call of `accepted`,
// so that close() returns only when no call is running and none will start. The mutex is
// recursive so that `accepted` may itself close the listener.
struct listener::state : std::enable_shared_from_this<listener::state> {
  state(io_pool& pool, std::shared_ptr<asio::ssl::context> ctx, const io_limits& l,
        std::function<void(std::shared_ptr<connection>)> a)
      : io(pool),
        strand(asio::make_strand(pool.context())),
        acceptor(strand),
        retry(strand),
        tls(std::move(ctx)),
        limits(l),
        accepted(std::move(a)) {}

  io_pool& io;
  asio::strand<asio::io_context::executor_type> strand;
  tcp::acceptor acceptor;
  asio::steady_timer retry;
  std::shared_ptr<asio::ssl::context> tls;
  io_limits limits;
  std::function<void(std::shared_ptr<connection>)> accepted;
  std::recursive_mutex callback_mutex;
  bool closed = false;

  void accept_next() {
    // Each accepted socket gets a strand of its own: connections never serialise each other.
    acceptor.async_accept(asio::make_strand(io.context()),
                          [self = shared_from_this()](const std::error_code& ec, tcp::socket s) {
                            self->on_accept(ec, std::move(s));
                          });
  }

  void on_accept(const std::error_code& ec, tcp::socket s) {
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
    if (ec) {
      io.log("accept failed: " + ec.message());
      retry.expires_after(k_accept_retry_delay);
      retry.async_wait([self = shared_from_this()](const std::error_code& wait) {
        if (!wait && self->acceptor.is_open()) self->accept_next();
      });
      return;
    }
    set_no_delay(s);
    if (!tls) {
      deliver(std::make_shared<stream_connection>(std::move(s), limits));
    } else {
      auto conn = std::make_shared<stream_connection>(std::move(s), tls, limits);
      conn->handshake_server(limits.handshake_timeout, [self = shared_from_this(), conn](error e) {
        if (e) {
          self->io.log("TLS handshake with " + conn->remote_endpoint() +
                       " failed: " + std::string(e.detail()));
          conn->abort_socket();
          return;
        }
        conn->confirm_tls_accept();
        self->deliver(conn);
      });
    }
    accept_next();
  }

  void deliver(const std::shared_ptr<stream_connection>& conn) {
    std::lock_guard lock(callback_mutex);
    if (closed) {
      conn->close(error(errc::connection_lost, "the listener closed"));
      return;
    }
    accepted(conn);
  }
};

result<std::unique_ptr<listener>> listener::open(
    io_pool& io, const std::string& host, std::uint16_t port, const tls_settings& tls,
    const io_limits& limits, std::function<void(std::shared_ptr<connection>)> accepted) {
  std::shared_ptr<asio::ssl::context> ctx;
  if (tls.enabled) {
    auto made = make_tls_context(tls, true);
    if (!made) return made.error();
    ctx = std::move(*made);
  }
  std::error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(io.context());
    const auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || found.empty()) {
      return error(errc::invalid_argument, "cannot resolve listen host '" + host +
                                               "': " + (ec ? ec.message() : "no address"));
    }
    endpoint = found.begin()->endpoint();
  }
  auto s = std::make_shared<state>(io, std::move(ctx), limits, std::move(accepted));
  const auto fail = [&](const char* step) -> result<std::unique_ptr<listener>> {
    return error(errc::unreachable, std::string("cannot ") + step + " " +
                                        format_endpoint(endpoint) + ": " + ec.message());
  };
  // Not yet shared with any thread: the acceptor may be set up here, off its strand.
  s->acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open a socket for");
  s->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("set SO_REUSEADDR on");
  s->acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  s->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  const auto bound = s->acceptor.local_endpoint(ec);
  if (ec) return fail("read the port of");
  asio::post(s->strand, [s] { s->accept_next(); });
  return std::unique_ptr<listener>(new listener(std::move(s), bound.port()));
}

void listener::close() {
  {
    std::lock_guard lock(state_->callback_mutex);
    if (state_->closed) return;
    state_->closed = true;
  }
  asio::post(state_->strand, [s = state_] {
    std::error_code ignored;
    s->acceptor.close(ignored);  // the pending accept completes with operation_aborted
    s->retry.cancel();
  });
}

listener::~listener() { close(); }

}  // namespace akt::remote::detail
