// What a handover carries of the fast path (see fastpath_handover.hh).
#include "lib/fastpath/fastpath_handover.hh"

#include <cstring>
#include <stdexcept>
#include <string>

namespace ferry::fastpath {
namespace {

// Appends and reads plain values; the bytes never leave the host, so host byte order.
class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  template <typename T>
  void put(const T& v) {
    put_bytes(&v, sizeof(T));
  }
  template <typename T>
  void put_all(const std::vector<T>& v) {
    put(static_cast<std::uint32_t>(v.size()));
    put_bytes(v.data(), v.size() * sizeof(T));
  }

 private:
  void put_bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<std::byte>& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  T get() {
    T v;
    get_bytes(&v, sizeof(T));
    return v;
  }
  template <typename T>
  std::vector<T> get_all() {
    auto n = get<std::uint32_t>();
    if (std::size_t{n} * sizeof(T) > in_.size() - at_) {
      throw std::invalid_argument("handed-over fast path state is truncated");
    }
    std::vector<T> v(n);
    get_bytes(v.data(), n * sizeof(T));
    return v;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  void get_bytes(void* p, std::size_t n) {
    if (n > in_.size() - at_)
      throw std::invalid_argument("handed-over fast path state is truncated");
    if (n) std::memcpy(p, in_.data() + at_, n);
    at_ += n;
  }
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

std::uint32_t u32(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) {
    throw std::invalid_argument(std::string("handed-over fast path: no ") + key);
  }
  return j[key].get<std::uint32_t>();
}

}  // namespace

nlohmann::json describe(const HandedOverFastpath& handed, std::vector<int>& fds) {
  nlohmann::json workers = nlohmann::json::array();
  fds.push_back(handed.memfd.get());
  nlohmann::json out = {{"memfd", fds.size() - 1},
                        {"hugepages", handed.hugepages},
                        {"frames", handed.umem.frame_count},
                        {"frame_bytes", handed.umem.frame_bytes},
                        {"headroom_bytes", handed.umem.headroom_bytes},
                        {"fill", handed.umem.fill_entries},
                        {"completion", handed.umem.completion_entries}};
  for (const auto& ports : handed.sockets) {
    nlohmann::json list = nlohmann::json::array();
    for (const xsk::HandedOverSocket& s : ports) {
      fds.push_back(s.fd.get());
      list.push_back({{"fd", fds.size() - 1},
                      {"ifname", s.ifname},
                      {"ifindex", s.ifindex},
                      {"queue", s.queue},
                      {"rx", s.rx_entries},
                      {"tx", s.tx_entries},
                      {"fill", s.fill_entries},
                      {"completion", s.completion_entries},
                      {"bind_flags", s.info.flags},
                      {"shared_umem", s.info.shared_umem},
                      {"zerocopy", s.info.zerocopy},
                      {"need_wakeup", s.info.need_wakeup}});
    }
    workers.push_back(std::move(list));
  }
  out["workers"] = std::move(workers);
  return out;
}

HandedOverFastpath handed_over_from(const nlohmann::json& d, std::vector<UniqueFd>& fds) {
  auto take_fd = [&fds](const nlohmann::json& j) {
    std::uint32_t index = u32(j, "fd");
    if (index >= fds.size() || !fds[index]) {
      throw std::invalid_argument("handed-over fast path: fd " + std::to_string(index) +
                                  " missing");
    }
    return std::move(fds[index]);
  };
  HandedOverFastpath out;
  out.umem.frame_count = u32(d, "frames");
  out.umem.frame_bytes = u32(d, "frame_bytes");
  out.umem.headroom_bytes = u32(d, "headroom_bytes");
  out.umem.fill_entries = u32(d, "fill");
  out.umem.completion_entries = u32(d, "completion");
  out.hugepages = d.value("hugepages", false);
  out.memfd = take_fd({{"fd", u32(d, "memfd")}});
  if (!d.contains("workers") || !d["workers"].is_array()) {
    throw std::invalid_argument("handed-over fast path: no workers");
  }
  for (const auto& ports : d["workers"]) {
    std::vector<xsk::HandedOverSocket> list;
    for (const auto& p : ports) {
      xsk::HandedOverSocket s;
      s.fd = take_fd(p);
      s.ifname = p.value("ifname", "");
      s.ifindex = p.value("ifindex", 0);
      s.queue = u32(p, "queue");
      s.rx_entries = u32(p, "rx");
      s.tx_entries = u32(p, "tx");
      s.fill_entries = u32(p, "fill");
      s.completion_entries = u32(p, "completion");
      s.info.flags = static_cast<std::uint16_t>(u32(p, "bind_flags"));
      s.info.shared_umem = p.value("shared_umem", false);
      s.info.zerocopy = p.value("zerocopy", false);
      s.info.need_wakeup = p.value("need_wakeup", false);
      list.push_back(std::move(s));
    }
    out.sockets.push_back(std::move(list));
  }
  return out;
}

std::vector<std::byte> pack(std::span<const WorkerCarry> carries) {
  std::vector<std::byte> out;
  Writer w(out);
  w.put(static_cast<std::uint32_t>(carries.size()));
  for (const WorkerCarry& c : carries) {
    w.put(c.queue);
    w.put_all(c.free_frames);
    w.put(c.flows.capacity);
    w.put_all(c.flows.slots);
    w.put_all(c.flows.tags);
    w.put_all(c.flows.entries);
  }
  return out;
}

std::vector<WorkerCarry> unpack(std::span<const std::byte> bytes) {
  Reader r(bytes);
  auto n = r.get<std::uint32_t>();
  if (n > 4096) throw std::invalid_argument("handed-over fast path state: too many workers");
  std::vector<WorkerCarry> out(n);
  for (WorkerCarry& c : out) {
    c.queue = r.get<std::uint32_t>();
    c.free_frames = r.get_all<std::uint64_t>();
    c.flows.capacity = r.get<std::uint32_t>();
    c.flows.slots = r.get_all<std::uint32_t>();
    c.flows.tags = r.get_all<std::uint8_t>();
    c.flows.entries = r.get_all<FlowEntry>();
  }
  if (!r.done()) throw std::invalid_argument("handed-over fast path state has trailing bytes");
  return out;
}

}  // namespace ferry::fastpath
