// The test server's map from every connection ID it issued (and each client's original DCID) to
// its connection: packets are matched to connections by DCID, never by address, so a client whose
// address changes keeps its connection.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

namespace ferry::quic_test {

class QuicConnection;

class CidTable {
 public:
  void add(std::span<const std::uint8_t> cid, QuicConnection* connection) {
    table_[key(cid)] = connection;
  }
  void remove(std::span<const std::uint8_t> cid) { table_.erase(key(cid)); }
  QuicConnection* find(std::span<const std::uint8_t> cid) const {
    auto it = table_.find(key(cid));
    return it == table_.end() ? nullptr : it->second;
  }

 private:
  static std::string key(std::span<const std::uint8_t> cid) {
    return std::string(reinterpret_cast<const char*>(cid.data()), cid.size());
  }
  std::unordered_map<std::string, QuicConnection*> table_;
};

}  // namespace ferry::quic_test
