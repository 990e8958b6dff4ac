// The handover's typed messages (see offer.hh). On the wire the head is
// {"type", "schema", "version", "from_pid", "at_ns", "planes": {NAME: {"fields", "fds":
// {FD_NAME: N}, "bytes": [OFFSET, LENGTH]}}}: N numbers the message's fds, the range is in its
// body; only encode() and decode() ever see either.
#include "lib/handover/offer.hh"

#include <fmt/format.h>

#include <set>

namespace ferry::handover {
namespace {

using nlohmann::json;

std::string who(const json& head) {
  return fmt::format("the running ferryd (version {}, pid {})",
                     head.contains("version") && head["version"].is_string()
                         ? head["version"].get<std::string>()
                         : std::string("?"),
                     head.contains("from_pid") && head["from_pid"].is_number_integer()
                         ? head["from_pid"].get<int>()
                         : 0);
}

void check_schema(const json& head) {
  if (!head.contains("schema")) {
    throw OfferError(fmt::format(
        "{} sent a handover offer without a schema (schema 1, fds by index); this ferryd reads "
        "schema {} only: restart ferryd instead of upgrading in place",
        who(head), kOfferSchema));
  }
  if (!head["schema"].is_number_integer() || head["schema"].get<int>() != kOfferSchema) {
    throw OfferError(fmt::format(
        "{} sent a handover offer of schema {}; this ferryd reads schema {} only: restart ferryd "
        "instead of upgrading in place",
        who(head), head["schema"].dump(), kOfferSchema));
  }
}

OfferPart decode_part(const std::string& plane, const json& in, std::vector<UniqueFd>& fds,
                      std::set<std::size_t>& taken, const std::vector<std::byte>& body) {
  if (!in.is_object())
    throw OfferError(fmt::format("handover offer: part '{}' is no object", plane));
  OfferPart out;
  out.fields = in.value("fields", json::object());
  const json fds_by_name = in.value("fds", json::object());
  for (const auto& [name, index] : fds_by_name.items()) {
    if (!index.is_number_unsigned() || index.get<std::size_t>() >= fds.size() ||
        !taken.insert(index.get<std::size_t>()).second) {
      throw OfferError(fmt::format(
          "handover offer: fd '{}' of part '{}' is not one the message carries", name, plane));
    }
    out.put_fd(name, std::move(fds[index.get<std::size_t>()]));
  }
  if (in.contains("bytes")) {
    const json& range = in["bytes"];
    if (!range.is_array() || range.size() != 2 || !range[0].is_number_unsigned() ||
        !range[1].is_number_unsigned() || range[0].get<std::size_t>() > body.size() ||
        range[1].get<std::size_t>() > body.size() - range[0].get<std::size_t>()) {
      throw OfferError(
          fmt::format("handover offer: the bytes of part '{}' are not in the message", plane));
    }
    auto first = body.begin() + static_cast<std::ptrdiff_t>(range[0].get<std::size_t>());
    out.bytes.assign(first, first + static_cast<std::ptrdiff_t>(range[1].get<std::size_t>()));
  }
  return out;
}

}  // namespace

void OfferPart::put_fd(std::string name, UniqueFd fd) {
  if (!fd) return;
  if (fds_.contains(name))
    throw OfferError(fmt::format("handover offer: fd '{}' given twice", name));
  fds_.emplace(std::move(name), std::move(fd));
}

UniqueFd OfferPart::take_fd(std::string_view name) {
  auto it = fds_.find(name);
  if (it == fds_.end()) return UniqueFd();
  UniqueFd fd = std::move(it->second);
  fds_.erase(it);
  return fd;
}

UniqueFd OfferPart::require_fd(std::string_view name) {
  UniqueFd fd = take_fd(name);
  if (!fd) throw OfferError(fmt::format("handover offer: no fd '{}'", name));
  return fd;
}

OfferPart& Offer::part(std::string_view plane) {
  auto it = parts_.find(plane);
  if (it == parts_.end()) it = parts_.emplace(std::string(plane), OfferPart{}).first;
  return it->second;
}

OfferPart Offer::take_part(std::string_view plane) {
  auto it = parts_.find(plane);
  if (it == parts_.end()) {
    throw OfferError(fmt::format(
        "the handover offer from ferryd {} (pid {}) has no part for the {} plane, which this "
        "ferryd needs: restart ferryd instead of upgrading in place",
        version.empty() ? "?" : version, from_pid, plane));
  }
  OfferPart out = std::move(it->second);
  parts_.erase(it);
  return out;
}

std::vector<std::string> Offer::planes() const {
  std::vector<std::string> out;
  for (const auto& [name, part] : parts_) out.push_back(name);
  return out;
}

std::size_t Offer::fd_count() const {
  std::size_t n = 0;
  for (const auto& [name, part] : parts_) n += part.fd_count();
  return n;
}

Offer::Wire Offer::encode() const {
  Wire wire;
  json planes = json::object();
  for (const auto& [name, part] : parts_) {
    json fds = json::object();
    for (const auto& [fd_name, fd] : part.fds()) {
      fds[fd_name] = wire.fds.size();
      wire.fds.push_back(fd.get());
    }
    json out = {{"fields", part.fields}, {"fds", std::move(fds)}};
    if (!part.bytes.empty()) {
      out["bytes"] = {wire.body.size(), part.bytes.size()};
      wire.body.insert(wire.body.end(), part.bytes.begin(), part.bytes.end());
    }
    planes[name] = std::move(out);
  }
  wire.head = {{"type", stage},        {"schema", kOfferSchema}, {"version", version},
               {"from_pid", from_pid}, {"at_ns", at_ns},         {"planes", std::move(planes)}};
  return wire;
}

Offer Offer::decode(Message message, std::string_view stage) {
  const json& head = message.head;
  if (!head.is_object()) throw OfferError("handover offer: the head is no JSON object");
  check_schema(head);
  const std::string type = head.value("type", "");
  if (type != stage) {
    throw OfferError(fmt::format("handover: expected a '{}' message, got '{}'", stage, type));
  }
  Offer out;
  out.stage = type;
  out.version = head.value("version", "");
  out.from_pid = head.value("from_pid", 0);
  out.at_ns = head.value("at_ns", std::uint64_t{0});
  if (!head.contains("planes") || !head["planes"].is_object()) {
    throw OfferError("handover offer: no planes");
  }
  std::set<std::size_t> taken;
  for (const auto& [plane, part] : head["planes"].items()) {
    out.parts_.emplace(plane, decode_part(plane, part, message.fds, taken, message.body));
  }
  return out;
}

}  // namespace ferry::handover
