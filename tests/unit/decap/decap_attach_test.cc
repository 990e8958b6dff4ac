// ferry-decap's attach, detach and status on a veth pair in a network namespace and a mount
// namespace of this test's own: the pinned link keeps the program on the interface after the
// command's objects are gone, detach takes it away, and no failed attach leaves pins behind.
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "lib/decap/decap_commands.hh"
#include "lib/decap/decap_program.hh"
#include "tests/unit/decap/decap_frames.hh"

namespace ferry::decap::testing {
namespace {

namespace fs = std::filesystem;

void sh(const std::string& command) {
  ASSERT_EQ(std::system((command + " >/dev/null 2>&1").c_str()), 0) << command;
}

// The XDP program id on `ifname` (0: none), and how it is attached.
std::uint32_t xdp_program_id(const std::string& ifname, std::uint32_t* mode = nullptr) {
  LIBBPF_OPTS(bpf_xdp_query_opts, opts);
  unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0 || bpf_xdp_query(static_cast<int>(ifindex), 0, &opts) != 0) return 0;
  if (mode) *mode = opts.attach_mode;
  return opts.prog_id;
}

class DecapAttach : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The whole test binary moves into fresh namespaces: its veths and bpffs go when it exits.
    ASSERT_EQ(unshare(CLONE_NEWNET | CLONE_NEWNS), 0) << "needs root";
    ASSERT_EQ(mount("", "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    sh("ip link set lo up");
    sh("ip link add dc0 type veth peer name dc1");
    sh("ip link set dc0 up");
    sh("ip link set dc1 up");
    sh("ip addr add 10.0.1.7/24 dev dc0");
  }

  void SetUp() override {
    root_ = fs::temp_directory_path() / ("decap-test-" + std::to_string(getpid()));
    fs::create_directories(root_);
    ASSERT_EQ(mount("bpf", root_.c_str(), "bpf", 0, nullptr), 0);
    pin_dir_ = (root_ / "ferry-decap").string();
  }

  void TearDown() override {
    for (const auto& s : status(pin_dir_)) detach(pin_dir_, s.ifname);
    umount2(root_.c_str(), MNT_DETACH);
    fs::remove_all(root_);
  }

  AttachRequest request(const std::string& ifname, std::uint16_t port = 6080) {
    AttachRequest r;
    r.ifname = ifname;
    r.gue_port = port;
    r.pin_dir = pin_dir_;
    return r;
  }

  fs::path root_;
  std::string pin_dir_;
};

TEST_F(DecapAttach, PinnedLinkOutlivesTheCommandAndDetachRemovesIt) {
  auto result = attach(request("dc0"));
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].find("dc0: attached in native mode, GUE port 6080"), std::string::npos)
      << result.notes[0];
  std::uint32_t mode = 0;
  std::uint32_t id = xdp_program_id("dc0", &mode);
  EXPECT_NE(id, 0u) << "the program stays on the interface after attach() returned";
  EXPECT_EQ(mode, XDP_ATTACHED_DRV);
  for (const char* pin : {"link", "decap_counters", "decap_config", "local_addrs"}) {
    EXPECT_TRUE(fs::exists(fs::path(pin_dir_) / "dc0" / pin)) << pin;
  }

  auto all = status(pin_dir_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].ifname, "dc0");
  EXPECT_EQ(all[0].ifindex, if_nametoindex("dc0"));
  EXPECT_EQ(all[0].program_id, id);
  EXPECT_EQ(all[0].mode, bpf::FERRY_DECAP_MODE_NATIVE);
  EXPECT_EQ(all[0].gue_port, 6080);
  EXPECT_GE(all[0].local_addresses, 2u);  // 127.0.0.1 and 10.0.1.7 at least
  EXPECT_TRUE(all[0].problem.empty()) << all[0].problem;

  EXPECT_EQ(detach(pin_dir_, "dc0"), "dc0: detached (unpinned " + pin_dir_ + "/dc0)");
  EXPECT_EQ(xdp_program_id("dc0"), 0u);
  EXPECT_FALSE(fs::exists(pin_dir_)) << "the empty pin directory goes too";
  EXPECT_TRUE(status(pin_dir_).empty());
}

TEST_F(DecapAttach, AttachingAgainUpdatesInPlaceAndKeepsCounters) {
  attach(request("dc0"));
  std::uint32_t first_id = xdp_program_id("dc0");
  auto result = attach(request("dc0", 7000));
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].find("already attached (native mode); updated: GUE port 7000"),
            std::string::npos)
      << result.notes[0];
  std::uint32_t second_id = xdp_program_id("dc0");
  EXPECT_NE(second_id, 0u);
  EXPECT_NE(second_id, first_id) << "the link runs the newly loaded program";
  auto all = status(pin_dir_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].gue_port, 7000);
  EXPECT_EQ(all[0].program_id, second_id);
}

TEST_F(DecapAttach, GenericModeWhenAsked) {
  auto r = request("dc1");
  r.force_generic = true;
  attach(r);
  std::uint32_t mode = 0;
  EXPECT_NE(xdp_program_id("dc1", &mode), 0u);
  EXPECT_EQ(mode, XDP_ATTACHED_SKB);
  EXPECT_EQ(status(pin_dir_).at(0).mode, bpf::FERRY_DECAP_MODE_GENERIC);
}

TEST_F(DecapAttach, TwoInterfacesAreListedApart) {
  attach(request("dc0"));
  attach(request("dc1", 6081));
  auto all = status(pin_dir_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].ifname, "dc0");
  EXPECT_EQ(all[1].ifname, "dc1");
  EXPECT_EQ(all[1].gue_port, 6081);
  detach(pin_dir_, "dc0");
  EXPECT_EQ(xdp_program_id("dc0"), 0u);
  EXPECT_NE(xdp_program_id("dc1"), 0u) << "detaching one leaves the other";
  ASSERT_EQ(status(pin_dir_).size(), 1u);
}

TEST_F(DecapAttach, FailedAttachLeavesNoPins) {
  // Another program on the interface (not through a link ferry-decap owns): attach must refuse.
  DecapProgram other;
  unsigned ifindex = if_nametoindex("dc1");
  ASSERT_EQ(
      bpf_xdp_attach(static_cast<int>(ifindex), other.program_fd(), XDP_FLAGS_DRV_MODE, nullptr),
      0);
  try {
    attach(request("dc1"));
    ADD_FAILURE() << "attach succeeded over another XDP program";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dc1: attaching XDP failed"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(fs::path(pin_dir_) / "dc1"));
  bpf_xdp_detach(static_cast<int>(ifindex), XDP_FLAGS_DRV_MODE, nullptr);
}

TEST_F(DecapAttach, ClearErrors) {
  auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([&] { attach(request("nosuch0")); }).find("nosuch0: no such interface"),
            std::string::npos);
  EXPECT_NE(message([&] { attach(request("../x")); }).find("is not an interface name"),
            std::string::npos);
  EXPECT_NE(message([&] { detach(pin_dir_, "dc0"); }).find("dc0: ferry-decap is not attached"),
            std::string::npos);
  // Not on a bpffs, and this test runs in a mount namespace its parent does not share: a bpffs
  // mounted here would not outlast the command.
  std::string plain = (root_.parent_path() / ("decap-plain-" + std::to_string(getpid()))).string();
  auto r = request("dc0");
  r.pin_dir = plain;
  EXPECT_NE(message([&] { attach(r); }).find("runs in a mount namespace of its own"),
            std::string::npos);
  EXPECT_EQ(xdp_program_id("dc0"), 0u);
  fs::remove_all(plain);
}

TEST_F(DecapAttach, VanishedInterfaceShowsAsDetachedAndIsReplaced) {
  sh("ip link add dc2 type veth peer name dc3");
  attach(request("dc2"));
  sh("ip link del dc2");
  auto all = status(pin_dir_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].ifindex, 0u) << "the link lost its interface";
  sh("ip link add dc2 type veth peer name dc3");
  auto result = attach(request("dc2"));
  ASSERT_EQ(result.notes.size(), 2u);
  EXPECT_NE(result.notes[0].find("removed a stale attachment"), std::string::npos);
  EXPECT_NE(xdp_program_id("dc2"), 0u);
  detach(pin_dir_, "dc2");
  sh("ip link del dc2");
}

}  // namespace
}  // namespace ferry::decap::testing
