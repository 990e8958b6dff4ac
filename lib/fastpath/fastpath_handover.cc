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

namespace {

std::string socket_fd_name(std::size_t worker, std::size_t port) {
  return "xsk:" + std::to_string(worker) + ":" + std::to_string(port);
}

}  // namespace

void describe(HandedOverFastpath handed, handover::OfferPart& part) {
  nlohmann::json workers = nlohmann::json::array();
  nlohmann::json& out = part.fields;
  out = {{"hugepages", handed.hugepages},          {"frames", handed.umem.frame_count},
         {"frame_bytes", handed.umem.frame_bytes}, {"headroom_bytes", handed.umem.headroom_bytes},
         {"fill", handed.umem.fill_entries},       {"completion", handed.umem.completion_entries}};
  part.put_fd("umem", std::move(handed.memfd));
  for (std::size_t w = 0; w < handed.sockets.size(); ++w) {
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t p = 0; p < handed.sockets[w].size(); ++p) {
      xsk::HandedOverSocket& s = handed.sockets[w][p];
      list.push_back({{"ifname", s.ifname},
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
      part.put_fd(socket_fd_name(w, p), std::move(s.fd));
    }
    workers.push_back(std::move(list));
  }
  out["workers"] = std::move(workers);
}

HandedOverFastpath handed_over_from(handover::OfferPart& part) {
  const nlohmann::json& d = part.fields;
  auto take_fd = [&part](const std::string& name) {
    UniqueFd fd = part.take_fd(name);
    if (!fd) throw std::invalid_argument("handed-over fast path: fd " + name + " missing");
    return fd;
  };
  HandedOverFastpath out;
  out.umem.frame_count = u32(d, "frames");
  out.umem.frame_bytes = u32(d, "frame_bytes");
  out.umem.headroom_bytes = u32(d, "headroom_bytes");
  out.umem.fill_entries = u32(d, "fill");
  out.umem.completion_entries = u32(d, "completion");
  out.hugepages = d.value("hugepages", false);
  out.memfd = take_fd("umem");
  if (!d.contains("workers") || !d["workers"].is_array()) {
    throw std::invalid_argument("handed-over fast path: no workers");
  }
  for (std::size_t w = 0; w < d["workers"].size(); ++w) {
    const nlohmann::json& ports = d["workers"][w];
    std::vector<xsk::HandedOverSocket> list;
    for (std::size_t p = 0; p < ports.size(); ++p) {
      const nlohmann::json& j = ports[p];
      xsk::HandedOverSocket s;
      s.fd = take_fd(socket_fd_name(w, p));
      s.ifname = j.value("ifname", "");
      s.ifindex = j.value("ifindex", 0);
      s.queue = u32(j, "queue");
      s.rx_entries = u32(j, "rx");
      s.tx_entries = u32(j, "tx");
      s.fill_entries = u32(j, "fill");
      s.completion_entries = u32(j, "completion");
      s.info.flags = static_cast<std::uint16_t>(u32(j, "bind_flags"));
      s.info.shared_umem = j.value("shared_umem", false);
      s.info.zerocopy = j.value("zerocopy", false);
      s.info.need_wakeup = j.value("need_wakeup", false);
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
