// The worker's fragment table (see fragment_table.hh).
#include "lib/fastpath/fragment_table.hh"

#include <stdexcept>

#include "lib/packet/flow_hash.hh"

namespace ferry::fastpath {

FragmentKey fragment_key(const packet::ParsedPacket& p, const packet::Fragment& f) noexcept {
  return FragmentKey{p.src_address, p.dst_address, f.id, p.version};
}

FragmentTable::FragmentTable(const Limits& limits) : limits_(limits) {
  if (limits_.datagrams < kWays || (limits_.datagrams & (limits_.datagrams - 1)) != 0) {
    throw std::invalid_argument("fragment table: datagrams must be a power of two >= 4");
  }
  bucket_mask_ = limits_.datagrams / kWays - 1;
  datagrams_ = std::make_unique<Datagram[]>(limits_.datagrams);
  held_ = std::make_unique<HeldFrame[]>(limits_.held_frames);
}

std::uint32_t FragmentTable::bucket_of(const FragmentKey& key) const noexcept {
  std::uint64_t h = packet::load_u64(key.src.data()) * 0x9e3779b97f4a7c15ull;
  h ^= packet::load_u64(key.src.data() + 8) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
  h ^= packet::load_u64(key.dst.data()) + 0x85ebca6b0c2b2ae3ull + (h << 6) + (h >> 2);
  h ^= packet::load_u64(key.dst.data() + 8) + 0xc2b2ae3d27d4eb4full + (h << 6) + (h >> 2);
  h ^=
      (std::uint64_t{key.id} << 8 | static_cast<std::uint8_t>(key.version)) * 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<std::uint32_t>(h) & bucket_mask_;
}

FragmentSeen FragmentTable::note_bytes(Datagram& d, const packet::Fragment& f) noexcept {
  if (d.refused) return FragmentSeen::refused;
  const std::uint32_t begin = f.offset_bytes;
  const std::uint32_t end = f.end_bytes();
  auto refuse_all = [&d](FragmentSeen why) {
    d.refused = true;
    d.refused_ms = d.last_ms;
    return why;
  };
  // A last fragment fixes the datagram's end: bytes past it, or a second different end, are an
  // overlap in all but name.
  if (d.total_bytes != 0 && (end > d.total_bytes || (!f.more && end != d.total_bytes))) {
    return refuse_all(FragmentSeen::overlap);
  }
  if (!f.more && end < d.seen_bytes) return refuse_all(FragmentSeen::overlap);
  std::uint32_t after = kMaxPieces;   // the piece ending where this one begins
  std::uint32_t before = kMaxPieces;  // the piece beginning where this one ends
  for (std::uint32_t i = 0; i < d.pieces; ++i) {
    const Piece& p = d.seen[i];
    if (begin >= p.begin && end <= p.end) return FragmentSeen::duplicate;
    if (begin < p.end && end > p.begin) return refuse_all(FragmentSeen::overlap);
    if (p.end == begin) after = i;
    if (p.begin == end) before = i;
  }
  if (!f.more) {
    for (std::uint32_t i = 0; i < d.pieces; ++i) {
      if (d.seen[i].end > end) return refuse_all(FragmentSeen::overlap);
    }
    d.total_bytes = end;
  }
  if (after < kMaxPieces && before < kMaxPieces) {
    d.seen[after].end = d.seen[before].end;
    d.seen[before] = d.seen[--d.pieces];
  } else if (after < kMaxPieces) {
    d.seen[after].end = end;
  } else if (before < kMaxPieces) {
    d.seen[before].begin = begin;
  } else if (d.pieces == kMaxPieces) {
    return refuse_all(FragmentSeen::too_many);
  } else {
    d.seen[d.pieces++] = Piece{begin, end};
  }
  d.seen_bytes += end - begin;
  return d.decided ? FragmentSeen::decided : FragmentSeen::undecided;
}

void FragmentTable::decide(std::uint32_t slot, const FragmentDecision& decision) noexcept {
  Datagram& d = datagrams_[slot];
  d.decision = decision;
  d.decided = true;
}

void FragmentTable::refuse(std::uint32_t slot) noexcept {
  datagrams_[slot].refused = true;
  datagrams_[slot].refused_ms = datagrams_[slot].last_ms;
}

bool FragmentTable::hold(std::uint32_t slot, std::uint64_t addr, std::uint32_t len,
                         std::uint64_t now_ms) noexcept {
  if (held_count_ == limits_.held_frames || held_bytes_ + len > limits_.held_bytes) return false;
  held_[held_count_++] = HeldFrame{addr, len, slot, now_ms};
  held_bytes_ += len;
  return true;
}

std::uint32_t FragmentTable::take_held(std::uint32_t slot, std::span<HeldFrame> out) noexcept {
  std::uint32_t taken = 0;
  std::uint32_t kept = 0;
  for (std::uint32_t i = 0; i < held_count_; ++i) {
    if (held_[i].datagram == slot && taken < out.size()) {
      held_bytes_ -= held_[i].len;
      out[taken++] = held_[i];
    } else {
      held_[kept++] = held_[i];
    }
  }
  held_count_ = kept;
  return taken;
}

void FragmentTable::forget(std::uint32_t slot) noexcept {
  if (datagrams_[slot].used) --in_use_;
  datagrams_[slot].used = false;
}

}  // namespace ferry::fastpath
