// The egress attachment's ownership, on a veth pair in a network namespace of the test binary's
// own: the filter is at egress while owned; its teardown removes the clsact qdisc it created and
// leaves one that was there before (with the operator's other filters); an attach that fails
// says which interface and why; leave() (a handover) keeps both. Root, skipped otherwise.
#include "lib/tunnel_check/clsact_filter.hh"

#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "lib/metrics/registry.hh"
#include "lib/tunnel_check/tunnel_encap.hh"

namespace ferry::tunnel_check {
namespace {

void sh(const std::string& command) {
  ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
}

std::string output_of(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), buffer.size(), p)) out += buffer.data();
  ::pclose(p);
  return out;
}

bool has_clsact(const char* ifname) {
  return output_of(std::string("tc qdisc show dev ") + ifname).find("clsact") != std::string::npos;
}

std::string egress_filters(const char* ifname) {
  return output_of(std::string("tc filter show dev ") + ifname + " egress");
}

// Filters of ferry's program at the egress (one line each in `tc filter show`).
int ferry_filters(const char* ifname) {
  std::string text = egress_filters(ifname);
  int lines = 0;
  for (std::size_t at = 0; (at = text.find("direct-action", at)) != std::string::npos; ++at) {
    ++lines;
  }
  return lines;
}

class ClsactFilterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    // The whole binary moves into a fresh network namespace: its veths go when it exits.
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0);
    sh("ip link set lo up");
    sh("ip link add hc0 type veth peer name hc1");
    sh("ip link set hc0 up");
    sh("ip link set hc1 up");
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (CAP_BPF, CAP_NET_ADMIN)";
    program_ = std::make_unique<TunnelEncap>(registry_);
  }

  metrics::Registry registry_;
  std::unique_ptr<TunnelEncap> program_;
};

TEST_F(ClsactFilterTest, TeardownRemovesTheQdiscItCreated) {
  ASSERT_FALSE(has_clsact("hc0"));
  {
    ClsactFilter filter("hc0", program_->program_fd());
    EXPECT_TRUE(filter.created_qdisc());
    EXPECT_TRUE(has_clsact("hc0"));
    EXPECT_NE(egress_filters("hc0").find("ferry_hc_encap"), std::string::npos);
    filter.attach(program_->program_fd());  // again: replaced, not doubled
    EXPECT_EQ(ferry_filters("hc0"), 1);
  }
  EXPECT_FALSE(has_clsact("hc0"));
  EXPECT_EQ(egress_filters("hc0"), "");
}

TEST_F(ClsactFilterTest, TeardownLeavesAQdiscThatWasThereAndItsOtherFilters) {
  sh("tc qdisc add dev hc1 clsact");
  // The operator's own filter (this kernel has cls_bpf, not matchall or u32): handle 1, prio 1.
  bpf_tc_hook hook{};
  hook.sz = sizeof(hook);
  hook.ifindex = static_cast<int>(::if_nametoindex("hc1"));
  hook.attach_point = BPF_TC_EGRESS;
  bpf_tc_opts theirs{};
  theirs.sz = sizeof(theirs);
  theirs.handle = 1;
  theirs.priority = 1;
  theirs.prog_fd = program_->program_fd();
  ASSERT_EQ(bpf_tc_attach(&hook, &theirs), 0);
  {
    ClsactFilter filter("hc1", program_->program_fd());
    EXPECT_FALSE(filter.created_qdisc());
    EXPECT_EQ(ferry_filters("hc1"), 2);
  }
  EXPECT_TRUE(has_clsact("hc1"));
  std::string left = egress_filters("hc1");
  EXPECT_EQ(ferry_filters("hc1"), 1) << left;
  EXPECT_NE(left.find("handle 0x1 "), std::string::npos) << left;
  EXPECT_EQ(left.find("handle 0xfe "), std::string::npos) << left;
  sh("tc qdisc del dev hc1 clsact");
}

TEST_F(ClsactFilterTest, AQdiscHandedOverIsRemovedByTheSuccessor) {
  {
    ClsactFilter first("hc0", program_->program_fd());
    first.leave();  // the handover: the successor's filter replaces it
  }
  EXPECT_TRUE(has_clsact("hc0"));
  {
    ClsactFilter successor("hc0", program_->program_fd(), /*qdisc_was_ours=*/true);
    EXPECT_TRUE(successor.created_qdisc());
  }
  EXPECT_FALSE(has_clsact("hc0"));
}

TEST_F(ClsactFilterTest, ALeftoverTheSuccessorDoesNotTakeIsRemoved) {
  {
    ClsactFilter left("hc0", program_->program_fd());
    left.leave();
  }
  sh("tc qdisc add dev hc1 clsact");
  {
    ClsactFilter left("hc1", program_->program_fd());
    left.leave();
  }
  ClsactFilter::remove_leftover("hc0", /*remove_qdisc=*/true);  // the predecessor created it
  ClsactFilter::remove_leftover("hc1", /*remove_qdisc=*/false);
  ClsactFilter::remove_leftover("nosuch0", true);  // gone: nothing to do, no throw
  EXPECT_FALSE(has_clsact("hc0"));
  EXPECT_TRUE(has_clsact("hc1"));
  EXPECT_EQ(ferry_filters("hc1"), 0);
  sh("tc qdisc del dev hc1 clsact");
}

TEST_F(ClsactFilterTest, AttachingAgainBringsBackAQdiscRemovedMeanwhile) {
  sh("tc qdisc add dev hc1 clsact");
  ClsactFilter filter("hc1", program_->program_fd());
  EXPECT_FALSE(filter.created_qdisc());
  sh("tc qdisc del dev hc1 clsact");
  filter.attach(program_->program_fd());
  EXPECT_TRUE(filter.created_qdisc());  // so its teardown removes the one it made
  EXPECT_EQ(ferry_filters("hc1"), 1);
}

TEST_F(ClsactFilterTest, AnAttachThatFailsNamesTheInterface) {
  try {
    ClsactFilter filter("nosuch0", program_->program_fd());
    FAIL() << "attached to an interface that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nosuch0: no such interface"), std::string::npos)
        << e.what();
  }
}

TEST_F(ClsactFilterTest, TunnelEncapAttachesToItsInterfacesAndDetachesTheOnesThatLeave) {
  program_->apply({}, {"hc0", "hc1"});
  EXPECT_TRUE(has_clsact("hc0"));
  EXPECT_TRUE(has_clsact("hc1"));
  EXPECT_EQ(program_->created_qdiscs(), (std::vector<std::string>{"hc0", "hc1"}));
  program_->apply({}, {"hc1"});
  EXPECT_FALSE(has_clsact("hc0"));
  EXPECT_TRUE(has_clsact("hc1"));
  program_.reset();
  EXPECT_FALSE(has_clsact("hc1"));
}

TEST_F(ClsactFilterTest, AnInterfaceThatCameBackGetsTheProgramAgain) {
  sh("ip link add hc2 type veth peer name hc3");
  program_->apply({}, {"hc2"});
  EXPECT_TRUE(has_clsact("hc2"));
  sh("ip link del hc2");  // its peer, qdisc and filter go with it
  sh("ip link add hc2 type veth peer name hc3");
  program_->apply({}, {"hc2"});  // what the link watch's rebind does
  EXPECT_TRUE(has_clsact("hc2"));
  EXPECT_EQ(ferry_filters("hc2"), 1);
  program_.reset();
  EXPECT_FALSE(has_clsact("hc2"));
  sh("ip link del hc2");
}

}  // namespace
}  // namespace ferry::tunnel_check
