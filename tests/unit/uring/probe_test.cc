// The kernel probe: results agree with the running kernel (6.18 here: bundles and incremental
// rings must be found, the suite fails rather than skips without them) and reach the metrics.
#include "lib/uring/probe.hh"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include "lib/common/unique_fd.hh"
#include "lib/uring/buffer_ring.hh"
#include "lib/uring/uring.hh"
#include "lib/uring/uring_compat.hh"

namespace ferry::uring {
namespace {

bool kernel_at_least(const UringFeatures& f, unsigned major, unsigned minor) {
  return f.kernel_major > major || (f.kernel_major == major && f.kernel_minor >= minor);
}

TEST(UringProbe, FindsBundlesAndIncrementalRingsOnThisKernel) {
  const UringFeatures f = probe_features();
  ASSERT_TRUE(f.available) << f.error;
  // ferry's receive path is built for 6.12+; a machine without these must fail loudly here.
  EXPECT_TRUE(kernel_at_least(f, 6, 12)) << "kernel " << f.kernel_release;
  EXPECT_TRUE(f.bundle) << "IORING_FEAT_RECVSEND_BUNDLE missing on " << f.kernel_release;
  EXPECT_TRUE(f.incremental) << "IOU_PBUF_RING_INC refused on " << f.kernel_release;
  EXPECT_TRUE(f.multishot_recv);
  EXPECT_TRUE(f.multishot_accept);
  EXPECT_TRUE(f.send_zc);
}

TEST(UringProbe, AgreesWithTheFeatureBitsAndTheKernelVersion) {
  const UringFeatures f = probe_features();
  ASSERT_TRUE(f.available) << f.error;
  EXPECT_EQ(f.bundle, (f.ring_features & IORING_FEAT_RECVSEND_BUNDLE) != 0);
  // Without distribution backports the features follow their upstream releases.
  EXPECT_EQ(f.bundle, kernel_at_least(f, 6, 10));
  EXPECT_EQ(f.incremental, kernel_at_least(f, 6, 12));
  EXPECT_EQ(f.multishot_recv, kernel_at_least(f, 6, 0));
  EXPECT_EQ(f.send_zc, kernel_at_least(f, 6, 0));
  EXPECT_FALSE(f.kernel_release.empty());
}

TEST(UringProbe, ProbesOnceAndCachesTheResult) {
  const UringFeatures& a = kernel_features();
  const UringFeatures& b = kernel_features();
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.to_json(), probe_features().to_json());
}

TEST(UringProbe, IncrementalProbeMatchesARealRegistration) {
  Uring ring;
  BufferRing buffers(ring, BufferRingConfig{8, 4096, 3, true});
  EXPECT_EQ(buffers.incremental(), kernel_features().incremental);
  // An unknown registration flag is refused with -EINVAL: the probe's fallback signal.
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  compat::BufRingRegistration reg;
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(page);
  reg.ring_entries = 8;
  reg.bgid = 4;
  reg.flags = 0x80;
  EXPECT_EQ(compat::register_buf_ring(ring.fd(), reg), -EINVAL);
  ::munmap(page, 4096);
}

TEST(UringProbe, MultishotRecvProbeMatchesALiveMultishotRecv) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  Uring ring;
  BufferRing buffers(ring, BufferRingConfig{8, 4096, 0, false});
  io_uring_sqe* sqe = ring.sqe();
  io_uring_prep_recv_multishot(sqe, a.get(), nullptr, 0, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = 0;
  sqe->user_data = 1;
  ASSERT_EQ(::send(b.get(), "x", 1, 0), 1);
  ASSERT_EQ(ring.submit_and_wait(1, 5000), 0);
  unsigned flags = 0;
  int res = 0;
  ring.drain([&](const io_uring_cqe& cqe) {
    if (cqe.user_data != 1) return;
    flags = cqe.flags;
    res = cqe.res;
  });
  EXPECT_EQ(res, 1);
  EXPECT_EQ((flags & IORING_CQE_F_MORE) != 0, kernel_features().multishot_recv);
}

TEST(UringProbe, JsonNamesEveryFeature) {
  nlohmann::json j = kernel_features().to_json();
  for (const char* key : {"available", "kernel", "ring_features", "multishot_recv",
                          "multishot_accept", "bundle", "incremental", "send_zc"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["bundle"], kernel_features().bundle);
}

TEST(UringProbe, ExportsOneGaugePerFeature) {
  metrics::Registry registry;
  UringFeatures f;
  f.bundle = true;
  f.incremental = false;
  f.multishot_recv = true;
  f.multishot_accept = true;
  f.send_zc = false;
  auto handle = register_feature_metrics(registry, f);
  metrics::Snapshot snap = registry.snapshot();
  auto family = std::find_if(snap.begin(), snap.end(), [](const metrics::Family& fam) {
    return fam.name == "ferry_uring_feature";
  });
  ASSERT_NE(family, snap.end());
  EXPECT_EQ(family->type, metrics::Type::gauge);
  ASSERT_EQ(family->samples.size(), 5u);
  auto value_of = [&](const std::string& feature) {
    for (const auto& s : family->samples) {
      if (s.labels == metrics::Labels{{"feature", feature}}) return s.value;
    }
    return -1.0;
  };
  EXPECT_EQ(value_of("bundle"), 1);
  EXPECT_EQ(value_of("incremental"), 0);
  EXPECT_EQ(value_of("multishot_recv"), 1);
  EXPECT_EQ(value_of("multishot_accept"), 1);
  EXPECT_EQ(value_of("send_zc"), 0);
}

}  // namespace
}  // namespace ferry::uring
