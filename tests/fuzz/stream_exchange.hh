// One client exchange with a server that runs on the same io_context: send everything,
// half-close, read until the server closes. For the fuzz targets of the control and metrics
// servers, whose clients are a socketpair end and a loopback TCP socket.
#pragma once

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/write.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace ferry::fuzz {

// Returns all the server wrote. A server that never closes (with the client's side of the
// stream ended) hangs here: libFuzzer's -timeout makes that a finding.
template <typename Socket>
std::string exchange(boost::asio::io_context& io, Socket& client, std::string_view bytes) {
  bool written = false;
  bool closed = false;
  std::string received;
  std::array<char, 16384> chunk;
  boost::asio::async_write(client, boost::asio::buffer(bytes),
                           [&](boost::system::error_code, std::size_t) {
                             boost::system::error_code ignored;
                             client.shutdown(boost::asio::socket_base::shutdown_send, ignored);
                             written = true;
                           });
  std::function<void()> read_more = [&] {
    client.async_read_some(boost::asio::buffer(chunk),
                           [&](boost::system::error_code error, std::size_t n) {
                             received.append(chunk.data(), n);
                             if (error) {
                               closed = true;
                             } else {
                               read_more();
                             }
                           });
  };
  read_more();
  while (!written || !closed) io.run_one();
  io.poll();  // what the server's side of the connection still had queued
  return received;
}

}  // namespace ferry::fuzz
