// The worker over user-space rings (FakePort) on one slab, for the worker's tests: ports, the
// lab's tables, frames in and out, and the frame account.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "lib/fastpath/worker.hh"
#include "tests/unit/fastpath/fake_port.hh"
#include "tests/unit/fastpath/lab_tables.hh"
#include "tests/unit/packet/frame_builder.hh"

namespace ferry::fastpath::test {

constexpr std::uint32_t kFrameBytes = 2048;
constexpr std::uint32_t kSlabFrames = 512;
constexpr std::uint32_t kFillTarget = 64;

class WorkerTest : public ::testing::Test {
 protected:
  // Ports at slots 0 and 1 unless `slots` says otherwise; `tx_entries` sizes each tx ring.
  // `tables`: the lab's when null.
  void start(std::vector<std::uint32_t> slots = {0, 1}, std::uint32_t tx_entries = 128,
             std::shared_ptr<const ConfigTables> tables = nullptr) {
    if (!tables) tables = config_tables(lab_config());
    board_ = std::make_unique<SnapshotBoard>(snapshot(std::move(tables), next_hop_tables()), 1);
    std::vector<WorkerPort> ports;
    for (std::uint32_t slot : slots) {
      fakes_.push_back(std::make_unique<FakePort>(umem_, kFrameBytes, 128, tx_entries));
      WorkerPort p;
      p.slot = slot;
      p.rings = fakes_.back()->rings();
      p.fill_target = kFillTarget;
      ports.push_back(p);
    }
    worker_ = std::make_unique<Worker>(options_, xsk::UmemSlab(umem_, kFrameBytes, 0, kSlabFrames),
                                       std::move(ports), board_->reader(0));
    worker_->prime();
  }
  void receive(std::size_t port, const packet::test::FrameSpec& spec, int count = 1) {
    for (int i = 0; i < count; ++i)
      ASSERT_TRUE(fakes_[port]->receive(packet::test::build_frame(spec).bytes));
  }
  std::uint64_t drops(Drop d) const {
    return worker_->counters().drops[static_cast<std::size_t>(d)].value();
  }
  std::uint64_t unreleased(Unreleased r) const {
    return worker_->counters().unreleased[static_cast<std::size_t>(r)].value();
  }
  // Everything in the worker's resolution queue, oldest first.
  std::vector<HopReport> reports() {
    std::vector<HopReport> out;
    while (auto r = worker_->resolution_queue().pop()) out.push_back(*r);
    return out;
  }
  // Holds the routed prefix's frames until their next hop's hold runs out (the timeout is the
  // behaviour under test: nothing else ends it).
  void run_out_the_hold() {
    worker_->poll_once();  // the first check after the hold starts its clock
    auto deadline = std::chrono::steady_clock::now() + HoldQueue::kTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    worker_->poll_once();
  }
  void expect_conserved() {
    xsk::FrameAccount a = worker_->account();
    EXPECT_TRUE(a.balanced()) << "free " << a.free_stack << " fill " << a.fill << " rx " << a.rx
                              << " tx " << a.tx << " completion " << a.completion;
    EXPECT_EQ(a.slab_frames, kSlabFrames);
  }

  WorkerOptions options_{.queue = 3};
  std::vector<std::byte> umem_ = std::vector<std::byte>(kSlabFrames * kFrameBytes);
  std::vector<std::unique_ptr<FakePort>> fakes_;
  std::unique_ptr<SnapshotBoard> board_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace ferry::fastpath::test
