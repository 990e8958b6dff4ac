// One control client connection: framing, ordering, backpressure and timeouts.
#include "lib/control/connection.hh"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <utility>

#include "lib/common/log.hh"
#include "lib/control/protocol.hh"

namespace ferry::control {
namespace {

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

Connection::Connection(Socket socket, const Peer& peer, bool needs_auth, std::string source,
                       const ConnectionLimits& limits, std::weak_ptr<ConnectionHost> host)
    : socket_(std::move(socket)),
      idle_timer_(socket_.get_executor()),
      peer_(peer),
      awaiting_auth_(needs_auth),
      source_(std::move(source)),
      limits_(limits),
      host_(std::move(host)) {}

void Connection::start() {
  last_activity_ = Clock::now();
  arm_idle_timer();
  start_read();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  // The host updates its books before the client can observe the close.
  if (auto host = host_.lock()) host->connection_closed(*this);
  boost::system::error_code ignored;
  socket_.close(ignored);
  idle_timer_.cancel();
  output_.clear();
  output_bytes_ = 0;
}

void Connection::start_read() {
  if (reading_ || closed_ || read_eof_ || close_after_flush_ || backlogged()) return;
  reading_ = true;
  socket_.async_read_some(
      boost::asio::buffer(chunk_),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
        self->on_read(error, bytes);
      });
}

void Connection::on_read(const boost::system::error_code& error, std::size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (error == boost::asio::error::eof) {
    read_eof_ = true;
  } else if (error) {
    log::debug("control: {}: read: {}", source_, error.message());
    close();
    return;
  } else {
    input_.append(chunk_.data(), bytes);
    last_activity_ = Clock::now();
  }
  process_input();
  finish_if_done();
  start_read();
}

// Takes complete lines from the input while fewer than max_pending_requests responses wait;
// the rest stays buffered (and reading stays paused) until the client takes its responses.
void Connection::process_input() {
  std::size_t head = 0;
  while (!closed_ && !close_after_flush_ && !backlogged()) {
    std::string_view rest = std::string_view(input_).substr(head);
    std::string_view line;
    auto newline = rest.find('\n');
    if (newline == std::string_view::npos) {
      // Longer than any request can be, even before its "\r\n": refuse it without buffering more.
      if (rest.size() > kMaxRequestBytes + 1) {
        reject_too_large();
        break;
      }
      if (!read_eof_ || rest.empty()) break;
      line = rest;  // the last request of a client that half-closed without a final newline
      head = input_.size();
    } else {
      line = rest.substr(0, newline);
      head += newline + 1;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxRequestBytes) {
      reject_too_large();
      break;
    }
    handle_line(line);
  }
  if (closed_) return;
  if (close_after_flush_) {
    input_.clear();  // nothing more will be read from this client
  } else {
    input_.erase(0, head);
  }
}

void Connection::handle_line(std::string_view line) {
  if (is_blank(line)) return;
  auto host = host_.lock();
  if (!host) {
    close();
    return;
  }
  if (awaiting_auth_) {
    if (host->authenticate(line, *this)) {
      awaiting_auth_ = false;
      peer_.tcp = true;
      queue_response(encode_result(nullptr, {{"authenticated", true}}));
    } else {
      close_after_flush_ = true;
      queue_response(encode_error(nullptr, "unauthorized",
                                  "authentication failed: the first line on a TCP control "
                                  "connection must be {\"auth\":\"<token>\"} with the token "
                                  "from control.tcp.token_file"));
    }
    return;
  }
  if (host->take_socket(line, peer_, socket_.native_handle())) {
    close();
    return;
  }
  queue_response(host->handle_request(line, peer_));
}

void Connection::reject_too_large() {
  if (auto host = host_.lock()) host->request_too_large(*this);
  log::debug("control: {}: request line over {} bytes; closing", source_, kMaxRequestBytes);
  close_after_flush_ = true;
  queue_response(encode_error(
      nullptr, "too_large",
      fmt::format("request line exceeds {} bytes; closing the connection", kMaxRequestBytes)));
}

void Connection::queue_response(std::string response) {
  if (closed_) return;
  response.push_back('\n');
  output_bytes_ += response.size();
  output_.push_back(std::move(response));
  // One response of any size may wait; more than the cap means the client is not reading.
  if (output_.size() > 1 && output_bytes_ > limits_.max_pending_output_bytes) {
    log::info(
        "control: {}: closing a client that does not read its responses ({} bytes "
        "pending)",
        source_, output_bytes_);
    if (auto host = host_.lock()) host->slow_reader(*this);
    close();
    return;
  }
  start_write();
}

void Connection::start_write() {
  if (writing_ || closed_ || output_.empty()) return;
  writing_ = true;
  boost::asio::async_write(socket_, boost::asio::buffer(output_.front()),
                           [self = shared_from_this()](const boost::system::error_code& error,
                                                       std::size_t) { self->on_written(error); });
}

void Connection::on_written(const boost::system::error_code& error) {
  writing_ = false;
  if (closed_) return;
  if (error) {
    log::debug("control: {}: write: {}", source_, error.message());
    close();
    return;
  }
  output_bytes_ -= output_.front().size();
  output_.pop_front();
  last_activity_ = Clock::now();
  start_write();
  process_input();  // lines held back while the client was behind
  finish_if_done();
  start_read();
}

void Connection::finish_if_done() {
  if (closed_ || writing_ || !output_.empty()) return;
  if (close_after_flush_ || (read_eof_ && input_.empty())) {
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    close();
  }
}

Connection::Clock::duration Connection::current_timeout() const {
  return awaiting_auth_ ? std::min(limits_.idle_timeout, limits_.auth_timeout)
                        : Clock::duration(limits_.idle_timeout);
}

// One timer wait per timeout period rather than one re-arm per I/O: activity only moves
// last_activity_, and an early wake-up re-arms for the remaining time.
void Connection::arm_idle_timer() {
  idle_timer_.expires_at(last_activity_ + current_timeout());
  idle_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    self->on_idle_timer(error);
  });
}

void Connection::on_idle_timer(const boost::system::error_code& error) {
  if (closed_ || error == boost::asio::error::operation_aborted) return;
  if (Clock::now() < last_activity_ + current_timeout()) {
    arm_idle_timer();
    return;
  }
  if (!output_.empty()) {
    // Stalled with responses it never took: the same failure as overflowing the output cap.
    log::info("control: {}: closing a client that stopped reading its responses", source_);
    if (auto host = host_.lock()) host->slow_reader(*this);
  } else if (awaiting_auth_) {
    // The host logs it, rate-limited: a flood of silent connections must not flood the journal.
    if (auto host = host_.lock()) host->auth_timed_out(*this);
  } else {
    log::debug("control: {}: idle for {} ms; closing", source_, limits_.idle_timeout.count());
  }
  close();
}

}  // namespace ferry::control
