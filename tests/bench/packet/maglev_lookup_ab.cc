// A/B of MaglevTable::lookup: 8 backends, 65537 slots, 200M lookups of mixed hashes.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include "lib/packet/maglev.hh"
using namespace ferry::packet;
int main() {
  std::vector<std::string> names;
  std::vector<MaglevBackend> in;
  for (int i = 0; i < 8; ++i) names.push_back("10.0.1." + std::to_string(i + 2) + ":53");
  for (int i = 0; i < 8; ++i) in.push_back({names[i], static_cast<std::uint16_t>(i)});
  std::vector<MaglevTable> tables;  // 64 services, as a snapshot holds them
  for (int s = 0; s < 64; ++s) tables.push_back(MaglevTable::build(in));
  std::uint64_t h = 0x9e3779b97f4a7c15ull, sum = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < 200'000'000; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    sum += tables[(h >> 7) & 63].lookup(h);
  }
  auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.3f ns/lookup (sum %llu)\n", ns / 200e6, static_cast<unsigned long long>(sum));
}
