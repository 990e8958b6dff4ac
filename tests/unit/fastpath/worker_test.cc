// The worker loop over user-space rings: forwarding between ports on one slab, drops per reason,
// a full tx ring, a table swap with frames in flight, frames held for a next hop (released, run
// out, reported, counted by why), the IP hop's frames (fragments held for their first, cut into
// pieces, answered) and frame conservation throughout.
#include "lib/fastpath/worker.hh"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "lib/packet/parse.hh"
#include "tests/unit/fastpath/worker_fixture.hh"
#include "tests/unit/packet/ip_hop_builder.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using packet::test::build_frame;

net::IpAddress destination_of(const std::vector<std::uint8_t>& frame) {
  packet::ParsedPacket p;
  EXPECT_EQ(packet::parse_frame({frame.data(), frame.size()}, p), packet::ParseError::none);
  return p.destination_ip();
}

TEST_F(WorkerTest, PrimeFillsEveryPortToItsTargetBeforeAnyTraffic) {
  start();
  xsk::FrameAccount a = worker_->account();
  EXPECT_EQ(a.fill, 2 * kFillTarget);
  EXPECT_EQ(a.free_stack, kSlabFrames - 2 * kFillTarget);
  EXPECT_TRUE(a.balanced());
}

TEST_F(WorkerTest, ForwardsBetweenPortsWithoutCopyingAndConservesEveryFrame) {
  start();
  for (std::uint16_t i = 0; i < 40; ++i) receive(0, request(static_cast<std::uint16_t>(1000 + i)));
  receive(1, reply(), 7);
  EXPECT_TRUE(worker_->poll_once());
  expect_conserved();
  EXPECT_EQ(worker_->account().tx, 47u) << "submitted, not yet completed";

  auto to_backends = fakes_[1]->transmit();
  auto to_client = fakes_[0]->transmit();
  ASSERT_EQ(to_backends.size(), 40u);
  ASSERT_EQ(to_client.size(), 7u);
  std::set<std::string> chosen;
  for (const auto& f : to_backends) chosen.insert(destination_of(f).to_string());
  EXPECT_EQ(chosen, (std::set<std::string>{"10.2.0.2", "10.2.0.3", "10.2.0.4"}));
  for (const auto& f : to_client) EXPECT_EQ(destination_of(f), ip("10.1.0.5"));

  EXPECT_TRUE(worker_->poll_once()) << "completions recycled";
  expect_conserved();
  xsk::FrameAccount a = worker_->account();
  EXPECT_EQ(a.tx + a.completion + a.rx, 0u);
  EXPECT_EQ(a.fill, 2 * kFillTarget) << "both fill sides back at their target";
  const WorkerCounters& c = worker_->counters();
  EXPECT_EQ(c.ports[0].rx_packets.value(), 40u);
  EXPECT_EQ(c.ports[1].rx_packets.value(), 7u);
  EXPECT_EQ(c.ports[1].tx_packets.value(), 40u);
  EXPECT_EQ(c.ports[0].tx_packets.value(), 7u);
  EXPECT_EQ(c.rejected_frames.value(), 0u);
}

TEST_F(WorkerTest, CountsWhatEachBackendWasSentAndRepliedInItsSlot) {
  BackendSlots slots;
  start({0, 1}, 128, config_tables(lab_config(), {}, &slots));
  for (std::uint16_t i = 0; i < 40; ++i) receive(0, request(static_cast<std::uint16_t>(1000 + i)));
  receive(1, reply("10.2.0.3"), 7);
  EXPECT_TRUE(worker_->poll_once());
  std::map<std::string, std::uint64_t> sent;
  std::uint64_t bytes = 0;
  for (const auto& f : fakes_[1]->transmit()) {
    ++sent[destination_of(f).to_string() + ":53"];
    bytes += f.size() - 14;
  }
  ASSERT_EQ(sent.size(), 3u);
  std::uint64_t counted_bytes = 0;
  for (const auto& [backend, n] : sent) {
    const BackendTraffic& c = worker_->backend_counters()[*slots.slot_of("dns", endpoint(backend))];
    EXPECT_EQ(c.in_packets.value(), n) << backend;
    EXPECT_EQ(c.out_packets.value(), backend == "10.2.0.3:53" ? 7u : 0u) << backend;
    counted_bytes += c.in_bytes.value();
  }
  EXPECT_EQ(counted_bytes, bytes);
}

TEST_F(WorkerTest, CountsEachDropReasonAndReturnsTheFramesToTheSlab) {
  start();
  receive(0, routed(1));  // ttl_expired
  auto tcp = request();
  tcp.protocol = IPPROTO_TCP;
  receive(0, tcp);  // unexpected
  auto truncated = build_frame(request()).bytes;
  truncated.resize(20);
  ASSERT_TRUE(fakes_[0]->receive(truncated));  // malformed
  auto nowhere = reply();
  nowhere.dst = packet::test::addr("172.16.9.9");
  receive(1, nowhere, 2);  // no_route
  worker_->poll_once();
  EXPECT_EQ(drops(Drop::ttl_expired), 1u);
  EXPECT_EQ(drops(Drop::unexpected), 1u);
  EXPECT_EQ(drops(Drop::malformed), 1u);
  EXPECT_EQ(drops(Drop::no_route), 2u);
  EXPECT_EQ(drops(Drop::tx_ring_full), 0u);
  expect_conserved();
  worker_->poll_once();
  EXPECT_EQ(worker_->account().fill, 2 * kFillTarget) << "dropped frames went back to the fill";
}

TEST_F(WorkerTest, FullTxRingDropsTheSurplusAsTxRingFull) {
  start({0, 1}, 8);
  for (std::uint16_t i = 0; i < 20; ++i) receive(0, request(static_cast<std::uint16_t>(2000 + i)));
  worker_->poll_once();
  EXPECT_EQ(worker_->counters().ports[1].tx_packets.value(), 8u);
  EXPECT_EQ(drops(Drop::tx_ring_full), 12u);
  expect_conserved();
  EXPECT_EQ(fakes_[1]->transmit().size(), 8u);
  worker_->poll_once();
  expect_conserved();
}

TEST_F(WorkerTest, EgressWithoutASocketOnThisQueueIsNoTxQueue) {
  start({0});  // the backend-facing interface has no socket on this worker's queue
  receive(0, request(), 3);
  worker_->poll_once();
  EXPECT_EQ(drops(Drop::no_tx_queue), 3u);
  expect_conserved();
}

TEST_F(WorkerTest, TableSwapLeavesFramesInFlightAloneAndFreesTheOldTablesOnceSeen) {
  start();
  for (std::uint16_t i = 0; i < 30; ++i) receive(0, request(static_cast<std::uint16_t>(3000 + i)));
  worker_->poll_once();  // 30 frames now sit in port 1's tx ring, rewritten with the old tables
  for (std::uint16_t i = 0; i < 30; ++i) receive(0, request(static_cast<std::uint16_t>(4000 + i)));

  board_->publish(snapshot(config_tables(lab_config({"10.2.0.2:53"})), next_hop_tables()));
  EXPECT_EQ(board_->retired(), 1u) << "the worker has not moved yet";
  worker_->poll_once();
  EXPECT_EQ(board_->reclaim(), 0u) << "freed once the worker moved past it";
  EXPECT_EQ(worker_->counters().snapshot_swaps.value(), 2u);

  auto sent = fakes_[1]->transmit();
  ASSERT_EQ(sent.size(), 60u) << "no frame in flight was lost to the swap";
  std::set<std::string> before, after;
  for (std::size_t i = 0; i < 30; ++i) before.insert(destination_of(sent[i]).to_string());
  for (std::size_t i = 30; i < 60; ++i) after.insert(destination_of(sent[i]).to_string());
  EXPECT_EQ(before.size(), 3u) << "frames sent before the swap keep their backends";
  EXPECT_EQ(after, std::set<std::string>{"10.2.0.2"}) << "frames after it use the new table";
  worker_->poll_once();
  expect_conserved();
}

TEST_F(WorkerTest, CompletionsRefillTheirOwnFillRingAndTheSurplusServesTheOtherPort) {
  start();
  // One-way traffic: port 0 only receives, port 1 only transmits. Port 1's completions exceed
  // its fill ring's need, so they go to the free stack, from which port 0 is refilled.
  for (int round = 0; round < 20; ++round) {
    for (std::uint16_t i = 0; i < 50; ++i) {
      receive(0, request(static_cast<std::uint16_t>(5000 + round * 50 + i)));
    }
    worker_->poll_once();
    fakes_[1]->transmit();
    worker_->poll_once();
    expect_conserved();
  }
  EXPECT_EQ(worker_->counters().ports[1].tx_packets.value(), 1000u);
  EXPECT_EQ(worker_->account().fill, 2 * kFillTarget);
  EXPECT_EQ(worker_->counters().slab_empty.value(), 0u);
}

TEST_F(WorkerTest, FramesForAnUnresolvedNextHopAreHeldAndSentOnceItsMacIsPublished) {
  start();
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables(false)));
  for (std::uint16_t i = 0; i < 40; ++i) receive(0, request(static_cast<std::uint16_t>(6000 + i)));
  receive(1, reply(), 5);
  worker_->poll_once();
  EXPECT_EQ(worker_->held().size(), 45u);
  EXPECT_EQ(worker_->counters().neighbour_held.value(), 45u);
  EXPECT_EQ(fakes_[1]->transmit().size(), 0u);
  EXPECT_EQ(worker_->account().in_hands, 45u) << "held frames are in the worker's hands";
  expect_conserved();
  worker_->poll_once();
  EXPECT_EQ(worker_->held().size(), 45u) << "same tables: still waiting";

  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables()));
  worker_->poll_once();
  EXPECT_TRUE(worker_->held().empty());
  EXPECT_EQ(worker_->counters().neighbour_released.value(), 45u);
  auto to_backends = fakes_[1]->transmit();
  auto to_client = fakes_[0]->transmit();
  ASSERT_EQ(to_backends.size(), 40u);
  ASSERT_EQ(to_client.size(), 5u);
  for (std::size_t i = 0; i < to_backends.size(); ++i) {
    packet::ParsedPacket p;
    ASSERT_EQ(packet::parse_frame({to_backends[i].data(), to_backends[i].size()}, p),
              packet::ParseError::none);
    EXPECT_EQ(p.src_port, 6000 + i) << "sent in arrival order";
    EXPECT_TRUE(std::equal(kBackendMac.begin(), kBackendMac.end(), to_backends[i].begin()));
  }
  EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), to_client[0].begin()));
  EXPECT_EQ(drops(Drop::neighbour_timeout) + drops(Drop::neighbour_hold_full), 0u);
  worker_->poll_once();
  expect_conserved();
}

TEST_F(WorkerTest, HeldFramesBeyondTheWorkersBoundAreDroppedAsHoldFull) {
  start();
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables(false)));
  // One next hop (the routed prefix's gateway) and 200 small frames: a quarter of the 512-frame
  // slab, 128, are held.
  for (int round = 0; round < 4; ++round) {
    receive(0, routed(), 50);
    worker_->poll_once();
  }
  EXPECT_EQ(worker_->held().size(), kSlabFrames / 4);
  EXPECT_EQ(drops(Drop::neighbour_hold_full), 200u - kSlabFrames / 4);
  EXPECT_EQ(unreleased(Unreleased::hold_full), 200u - kSlabFrames / 4) << "and why";
  expect_conserved();
}

TEST_F(WorkerTest, HeldFramesOfANextHopThatNeverResolvesAreDroppedAfterTheTimeout) {
  start();
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables(false)));
  receive(0, routed(), 10);
  worker_->poll_once();
  ASSERT_EQ(worker_->held().size(), 10u);
  NeighbourKey gateway = reports().at(0).key;
  run_out_the_hold();
  EXPECT_TRUE(worker_->held().empty());
  EXPECT_EQ(drops(Drop::neighbour_timeout), 10u);
  EXPECT_EQ(reports(), (std::vector<HopReport>{{gateway, 10}}))
      << "the control thread hears of the timeout, with its frames, to say why";
  worker_->poll_once();
  expect_conserved();
  EXPECT_EQ(worker_->account().in_hands, 0u);

  // The next hop is not left stuck: its next frame is held afresh and asks for it again.
  receive(0, routed(), 3);
  worker_->poll_once();
  EXPECT_EQ(worker_->held().size(), 3u);
  EXPECT_EQ(reports(), (std::vector<HopReport>{{gateway, 0}}));
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables()));
  worker_->poll_once();
  EXPECT_EQ(worker_->counters().neighbour_released.value(), 3u);
  EXPECT_EQ(fakes_[1]->transmit().size(), 3u);
}

TEST_F(WorkerTest, ATimeoutTheControlThreadCannotHearOfIsCountedUnclassified) {
  start();
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables(false)));
  receive(0, routed(), 4);
  worker_->poll_once();
  // A control thread that drains nothing: the queue fills up with misses of other next hops.
  NeighbourKey other{9, packet::IpVersion::v4, {}};
  for (std::uint8_t i = 0; worker_->resolution_queue().push(other) != Queued::full; ++i) {
    other.address[3] = i;
  }
  run_out_the_hold();
  EXPECT_EQ(drops(Drop::neighbour_timeout), 4u);
  EXPECT_EQ(unreleased(Unreleased::unclassified), 4u);
}

TEST_F(WorkerTest, FramesHeldWhenTheWorkerStopsAreCountedAsStopped) {
  options_.idle_spin_turns = 4;
  options_.sleep_timeout_ms = 2;
  start();
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables(false)));
  receive(0, routed(), 6);
  std::atomic<bool> stop{false};
  std::thread t([&] { worker_->run(stop, -1, [] {}); });
  while (worker_->counters().neighbour_held.value() < 6) std::this_thread::yield();
  stop.store(true);
  t.join();
  EXPECT_EQ(unreleased(Unreleased::stopped), 6u);
  EXPECT_EQ(drops(Drop::neighbour_timeout), 0u);
  expect_conserved();
  EXPECT_EQ(worker_->account().in_hands, 0u);
}

TEST_F(WorkerTest, FirstMissOfANextHopWakesTheControlThreadOnce) {
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(wake, 0);
  options_.resolve_wake_fd = wake;
  start();
  board_->publish(snapshot(config_tables(lab_config()), next_hop_tables(false)));
  receive(0, routed(), 5);
  worker_->poll_once();
  std::uint64_t wakes = 0;
  ASSERT_EQ(::read(wake, &wakes, sizeof(wakes)), static_cast<ssize_t>(sizeof(wakes)));
  EXPECT_EQ(wakes, 1u);
  receive(0, routed(), 5);
  worker_->poll_once();
  EXPECT_LT(::read(wake, &wakes, sizeof(wakes)), 0) << "the next hop is already queued";
  ::close(wake);
}

TEST_F(WorkerTest, RunBeatsWhileIdleAndStopsOnRequest) {
  options_.idle_spin_turns = 4;
  options_.sleep_timeout_ms = 2;
  start();
  std::atomic<bool> stop{false};
  std::atomic<int> beats{0};
  std::thread t([&] { worker_->run(stop, -1, [&] { beats.fetch_add(1); }); });
  while (beats.load() < 3) std::this_thread::yield();  // idle: the beats come from poll timeouts
  stop.store(true);
  t.join();
  EXPECT_GE(worker_->counters().sleeps.value(), 1u);
  EXPECT_EQ(board_->seen(0), std::numeric_limits<std::uint64_t>::max()) << "reader parked";
}

packet::test::BuiltFrame big_request(std::uint16_t client_port, std::size_t payload_bytes) {
  return build_frame(large_request(client_port, payload_bytes));
}

std::uint16_t be16_at(const std::vector<std::uint8_t>& f, std::size_t at) {
  return static_cast<std::uint16_t>(f[at] << 8 | f[at + 1]);
}

// The destination of an IPv4 frame that parse_frame() may refuse (a fragment).
net::IpAddress destination_of_fragment(const std::vector<std::uint8_t>& frame) {
  std::array<std::uint8_t, 16> bytes{};
  std::copy_n(frame.begin() + 14 + 16, 4, bytes.begin());
  return {AF_INET, bytes};
}

// The worker as an IP hop: ports with MTUs and addresses in its snapshot.
class WorkerIpHopTest : public WorkerTest {
 protected:
  void start_with_ports(std::uint32_t mtu0 = 1500, std::uint32_t mtu1 = 1500) {
    start();
    auto s = snapshot(config_tables(lab_config()), next_hop_tables());
    s->ports = port_facts(mtu0, mtu1);
    board_->publish(std::move(s));
  }
  void receive_bytes(std::size_t port, const std::vector<std::uint8_t>& bytes) {
    ASSERT_TRUE(fakes_[port]->receive(bytes));
  }
  // The third and the second fragment of `whole` (3,008 bytes of UDP), held for their first.
  void hold_later_fragments(const packet::test::BuiltFrame& whole) {
    receive_bytes(0, packet::test::ipv4_fragment(whole, 2960, 48, false));
    receive_bytes(0, packet::test::ipv4_fragment(whole, 1480, 1480, true));
    worker_->poll_once();
    ASSERT_EQ(worker_->fragments().held_count(), 2u);
    EXPECT_EQ(worker_->account().in_hands, 2u) << "held fragments are in the worker's hands";
    expect_conserved();
  }
};

TEST_F(WorkerIpHopTest, LaterFragmentsWaitInTheWorkersHandsUntilTheirFirstComes) {
  start_with_ports();
  auto whole = big_request(40000, 3000);
  hold_later_fragments(whole);
  EXPECT_EQ(worker_->counters().fragments_held.value(), 2u);
  EXPECT_TRUE(fakes_[1]->transmit().empty());
  worker_->poll_once();
  expect_conserved();

  receive_bytes(0, packet::test::ipv4_fragment(whole, 0, 1480, true));
  worker_->poll_once();
  auto sent = fakes_[1]->transmit();
  ASSERT_EQ(sent.size(), 3u);
  std::vector<std::uint16_t> offsets;
  for (const auto& f : sent) {
    offsets.push_back(static_cast<std::uint16_t>((be16_at(f, 14 + 6) & 0x1fff) * 8));
    EXPECT_EQ(destination_of_fragment(f), destination_of_fragment(sent[0]));
  }
  EXPECT_EQ(offsets, (std::vector<std::uint16_t>{0, 2960, 1480}))
      << "the first, then the held ones in the order they came";
  EXPECT_EQ(worker_->counters().fragments_forwarded.value(), 3u);
  EXPECT_EQ(worker_->fragments().held_count(), 0u);
  worker_->poll_once();
  expect_conserved();
  EXPECT_EQ(worker_->account().in_hands, 0u);
}

TEST_F(WorkerIpHopTest, HeldFragmentsOfAFirstThatExpiresAreRefusedAndItIsAnswered) {
  start_with_ports();
  packet::test::FrameSpec spec = large_request(40000, 3000);
  spec.hop_limit = 1;
  auto whole = packet::test::build_frame(spec);
  hold_later_fragments(whole);
  receive_bytes(0, packet::test::ipv4_fragment(whole, 0, 1480, true));
  worker_->poll_once();
  auto answered = fakes_[0]->transmit();
  ASSERT_EQ(answered.size(), 1u) << "time exceeded, about the first fragment";
  EXPECT_EQ(answered[0][14 + 9], IPPROTO_ICMP);
  EXPECT_EQ(answered[0][14 + 20], 11);
  EXPECT_EQ(answered[0].size(), 14u + 576u);
  EXPECT_TRUE(fakes_[1]->transmit().empty());
  EXPECT_EQ(drops(Drop::ttl_expired), 1u);
  EXPECT_EQ(drops(Drop::fragment_refused), 2u);
  EXPECT_EQ(worker_->counters().icmp_time_exceeded.value(), 1u);
  worker_->poll_once();
  expect_conserved();
  EXPECT_EQ(worker_->account().in_hands, 0u);
}

TEST_F(WorkerIpHopTest, FragmentsWhoseFirstNeverComesAreDroppedAfterTheHeldTimeout) {
  start_with_ports();
  hold_later_fragments(big_request(40000, 3000));
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(FragmentTable::Limits{}.held_timeout_ms + 1000);
  while (drops(Drop::fragment_timeout) < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the timeout is the behaviour
    worker_->poll_once();
  }
  EXPECT_EQ(drops(Drop::fragment_timeout), 2u);
  EXPECT_EQ(worker_->fragments().held_count(), 0u);
  worker_->poll_once();
  expect_conserved();
  EXPECT_EQ(worker_->account().in_hands, 0u);
}

TEST_F(WorkerIpHopTest, AFloodOfLaterFragmentsStaysWithinTheHeldBound) {
  start_with_ports();
  const std::uint32_t bound = kSlabFrames / 8;  // the worker's held_frames
  auto whole = big_request(40000, 100);
  std::uint32_t sent = 0;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 50; ++i, ++sent) {
      auto f = packet::test::ipv4_fragment(whole, 8, 100, false);
      packet::test::put16(f, 14 + 4, static_cast<std::uint16_t>(sent));  // its own datagram
      packet::test::fix_ipv4_checksum(f, 14);
      receive_bytes(0, f);
    }
    worker_->poll_once();
    EXPECT_LE(worker_->fragments().held_count(), bound);
    expect_conserved();
  }
  std::uint32_t held = worker_->fragments().held_count();
  EXPECT_EQ(held + drops(Drop::fragment_hold_full), sent)
      << "every fragment held or dropped (no room, or its full bucket's oldest datagram)";
  EXPECT_GE(held, bound - 4) << "at the bound, but for a full bucket's last eviction";
  EXPECT_EQ(worker_->account().in_hands, held);
}

TEST_F(WorkerIpHopTest, ADatagramWithoutDfOverTheEgressMtuLeavesInPieces) {
  start_with_ports(1500, 576);
  auto whole = big_request(40000, 1700);  // 1,708 bytes of UDP
  receive_bytes(0, whole.bytes);
  worker_->poll_once();
  auto sent = fakes_[1]->transmit();
  ASSERT_EQ(sent.size(), 4u) << "552 data bytes a piece";
  EXPECT_EQ(worker_->counters().fragments_made.value(), 4u);
  std::size_t data_bytes = 0;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const auto& f = sent[i];
    std::uint16_t flags_offset = be16_at(f, 14 + 6);
    EXPECT_EQ((flags_offset & 0x1fff) * 8u, 552 * i);
    EXPECT_EQ((flags_offset & 0x2000) != 0, i + 1 < sent.size()) << "MF";
    EXPECT_LE(be16_at(f, 14 + 2), 576);
    EXPECT_EQ(be16_at(f, 14 + 2), f.size() - 14);
    EXPECT_EQ(f[14 + 8], 63) << "TTL";
    EXPECT_EQ(be16_at(f, 14 + 10), packet::test::reference_ipv4_checksum(f, 14, 20));
    EXPECT_EQ(destination_of_fragment(f), destination_of_fragment(sent[0]));
    data_bytes += f.size() - 34;
  }
  EXPECT_EQ(data_bytes, 1708u);
  worker_->poll_once();
  expect_conserved();
}

TEST_F(WorkerIpHopTest, FramesCutIntoPiecesNeverOverflowABurstsStaging) {
  // One burst of 64 from the backends' port: a request to port 1 first, then a reply cut into
  // 4 pieces for port 0 (MTU 576) and 62 more replies: 66 frames staged for port 0 in one burst.
  options_.burst = 64;
  start_with_ports(576, 1500);
  receive(1, request(40000));
  packet::test::FrameSpec big = reply();
  big.payload.assign(1700, 'r');
  receive(1, big);
  receive(1, reply(), 62);
  worker_->poll_once();
  auto to_backends = fakes_[1]->transmit();
  auto to_client = fakes_[0]->transmit();
  ASSERT_EQ(to_backends.size(), 1u);
  EXPECT_EQ(be16_at(to_backends[0], 14 + 20), 40000) << "the request, nothing else";
  EXPECT_EQ(to_client.size(), 66u);
  EXPECT_EQ(worker_->counters().fragments_made.value(), 4u);
  worker_->poll_once();
  expect_conserved();
  EXPECT_EQ(worker_->counters().rejected_frames.value(), 0u);
}

}  // namespace
}  // namespace ferry::fastpath
