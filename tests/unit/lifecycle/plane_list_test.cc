// The daemon's planes in order, with fake planes that write down what is done to them: start in
// order and stop in reverse, a failure halfway unwinds exactly what started, a reload reaches
// every plane or none, and a handover offer round-trips with each plane's own part.
#include "lib/lifecycle/plane_list.hh"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/support/handover_support.hh"

namespace ferry::lifecycle {
namespace {

using Journal = std::vector<std::string>;

// The configs the tests apply tell themselves apart by log.level.
config::Config config_named(std::string name) {
  config::Config c;
  c.log.level = std::move(name);
  return c;
}

using test::inode_of;
using test::over_the_wire;
using test::stand_in;

// Writes "NAME EVENT [DETAIL]" for each call; fails where it was told to.
class FakePlane final : public Plane {
 public:
  FakePlane(std::string name, Journal& journal) : name_(std::move(name)), journal_(journal) {}

  std::string fail_start;    // start() throws when "yes"
  std::string refuse;        // prepare() refuses a config of this name
  std::string fail_commit;   // commit() throws for a config of this name
  std::string running;       // the config last committed (or started with)
  std::string handed_token;  // what start() read from its part of an offer
  ino_t handed_inode = 0;    // the inode of the fd it was handed
  UniqueFd own_fd = stand_in("fake");

  std::string_view name() const override { return name_; }
  void start(const config::Config& config, handover::OfferPart* handed) override {
    note("start", handed ? "handed" : "afresh");
    if (fail_start == "yes") throw std::runtime_error(name_ + " cannot start");
    if (handed) {
      handed_token = handed->fields.value("token", "");
      UniqueFd fd = handed->require_fd("listener");
      handed_inode = inode_of(fd.get());
    }
    running = config.log.level;
  }
  void serve(handover::OfferPart* paused) override {
    note("serve", paused ? paused->fields.value("carried", "") : "");
  }
  void prepare(const config::Config& next) override {
    note("prepare", next.log.level);
    if (next.log.level == refuse) throw std::runtime_error(name_ + " refuses " + refuse);
  }
  void commit(const config::Config& next, ApplyNotes& notes) override {
    note("commit", next.log.level);
    if (next.log.level == fail_commit) throw std::runtime_error(name_ + " failed to commit");
    running = next.log.level;
    notes.details[name_] = running;
  }
  void stop() override { note("stop"); }
  void describe(handover::OfferPart& part) override {
    note("describe");
    part.fields["token"] = name_ + "'s state";
    part.put_fd("listener", duplicate_fd(own_fd.get()));
  }
  void pause(handover::OfferPart& part) override {
    note("pause");
    part.fields["carried"] = name_ + "'s carry";
  }
  void release() override { note("release"); }

 private:
  void note(const std::string& event, const std::string& detail = "") {
    journal_.push_back(name_ + " " + event + (detail.empty() ? "" : " " + detail));
  }

  std::string name_;
  Journal& journal_;
};

// Three fake planes in a list, as the daemon has seven.
struct ThreePlanes {
  Journal journal;
  FakePlane control{"control", journal};
  FakePlane fastpath{"fastpath", journal};
  FakePlane tcp{"tcp", journal};
  PlaneList list{{&control, &fastpath, &tcp}};

  // Started on config "one", and the journal cleared.
  void start_on_one() {
    list.start(config_named("one"), nullptr);
    journal.clear();
  }
  // A reload from "one" to "two".
  void reload_two(ApplyNotes& notes) {
    const config::Config running = config_named("one");
    list.apply(config_named("two"), &running, notes);
  }
  void expect_every_plane_runs(const std::string& config) {
    for (const FakePlane* plane : {&control, &fastpath, &tcp}) {
      EXPECT_EQ(plane->running, config) << plane->name();
    }
  }
};

TEST(PlaneList, PlanesStartInOrderServeInOrderAndStopInReverse) {
  ThreePlanes p;
  p.list.start(config_named("one"), nullptr);
  p.list.serve(nullptr);
  EXPECT_EQ(p.list.started(), 3u);
  p.list.stop();
  EXPECT_EQ(p.journal, (Journal{"control start afresh", "fastpath start afresh", "tcp start afresh",
                                "control serve", "fastpath serve", "tcp serve", "tcp stop",
                                "fastpath stop", "control stop"}));
  EXPECT_EQ(p.list.started(), 0u);
  p.journal.clear();
  p.list.stop();
  EXPECT_TRUE(p.journal.empty()) << "a second stop touches nothing";
}

TEST(PlaneList, AFailureHalfwayUnwindsExactlyWhatStartedInReverse) {
  ThreePlanes p;
  p.tcp.fail_start = "yes";
  EXPECT_THROW(p.list.start(config_named("one"), nullptr), std::runtime_error);
  EXPECT_EQ(p.journal, (Journal{"control start afresh", "fastpath start afresh", "tcp start afresh",
                                "fastpath stop", "control stop"}));
  EXPECT_EQ(p.list.started(), 0u);
}

TEST(PlaneList, AFailureHalfwayThroughATakeoverReleasesThenStopsWhatStarted) {
  ThreePlanes before;
  handover::Offer offer;
  before.list.start(config_named("one"), nullptr);
  before.list.describe(offer);

  ThreePlanes p;
  p.fastpath.fail_start = "yes";
  EXPECT_THROW(p.list.start(config_named("one"), &offer), std::runtime_error);
  EXPECT_EQ(p.journal, (Journal{"control start handed", "fastpath start handed", "control release",
                                "control stop"}));
}

TEST(PlaneList, AReloadIsPreparedByEveryPlaneBeforeAnyCommits) {
  ThreePlanes p;
  p.start_on_one();
  ApplyNotes notes;
  p.reload_two(notes);
  EXPECT_EQ(p.journal, (Journal{"control prepare two", "fastpath prepare two", "tcp prepare two",
                                "control commit two", "fastpath commit two", "tcp commit two"}));
  p.expect_every_plane_runs("two");
  EXPECT_EQ(notes.details,
            (nlohmann::json{{"control", "two"}, {"fastpath", "two"}, {"tcp", "two"}}));
}

TEST(PlaneList, AReloadOnePlaneRefusesChangesNoPlane) {
  ThreePlanes p;
  p.start_on_one();
  p.tcp.refuse = "two";
  ApplyNotes notes;
  EXPECT_THROW(p.reload_two(notes), std::runtime_error);
  EXPECT_EQ(p.journal, (Journal{"control prepare two", "fastpath prepare two", "tcp prepare two"}));
  p.expect_every_plane_runs("one");
}

TEST(PlaneList, ACommitThatFailsRestoresTheRunningConfigWhereItReached) {
  ThreePlanes p;
  p.start_on_one();
  p.fastpath.fail_commit = "two";
  ApplyNotes notes;
  EXPECT_THROW(p.reload_two(notes), std::runtime_error);
  EXPECT_EQ(p.journal, (Journal{"control prepare two", "fastpath prepare two", "tcp prepare two",
                                "control commit two", "fastpath commit two", "control commit one",
                                "fastpath commit one"}));
  p.expect_every_plane_runs("one");
}

TEST(PlaneList, AnOfferRoundTripsEachPlanesOwnPartAndTheTakeoverIsTheSameLoop) {
  ThreePlanes old;
  old.list.start(config_named("one"), nullptr);
  handover::Offer offer;
  old.list.describe(offer);
  handover::Offer paused;
  paused.stage = "paused";
  old.list.pause(paused);
  old.list.release();
  old.list.stop();
  EXPECT_EQ(std::vector(old.journal.begin() + 3, old.journal.end()),
            (Journal{"control describe", "fastpath describe", "tcp describe", "control pause",
                     "fastpath pause", "tcp pause", "tcp release", "fastpath release",
                     "control release", "tcp stop", "fastpath stop", "control stop"}));

  ThreePlanes p;
  handover::Offer received = over_the_wire(offer, "offer");
  EXPECT_EQ(received.fd_count(), 3u);
  p.list.start(config_named("one"), &received);
  handover::Offer carried = over_the_wire(paused, "paused");
  p.list.serve(&carried);
  EXPECT_TRUE(p.list.took_over());
  EXPECT_EQ(p.journal, (Journal{"control start handed", "fastpath start handed", "tcp start handed",
                                "control serve control's carry", "fastpath serve fastpath's carry",
                                "tcp serve tcp's carry"}));
  for (auto [now, before] : {std::pair{&p.control, &old.control},
                             std::pair{&p.fastpath, &old.fastpath}, std::pair{&p.tcp, &old.tcp}}) {
    EXPECT_EQ(now->handed_token, std::string(before->name()) + "'s state");
    EXPECT_EQ(now->handed_inode, inode_of(before->own_fd.get())) << "its own fd, by name";
  }
}

TEST(PlaneList, APlaneMissingFromAnOfferIsRefusedWithItsNameBeforeAnyStarts) {
  Journal journal;
  FakePlane control{"control", journal};
  FakePlane fastpath{"fastpath", journal};
  PlaneList older{{&control, &fastpath}};
  older.start(config_named("one"), nullptr);
  handover::Offer offer;
  offer.version = "0.0.9";
  older.describe(offer);

  ThreePlanes p;
  handover::Offer received = over_the_wire(offer, "offer");
  try {
    p.list.start(config_named("one"), &received);
    FAIL() << "an offer without a tcp part was taken";
  } catch (const handover::OfferError& e) {
    EXPECT_NE(std::string(e.what()).find("no part for the tcp plane"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(p.journal.empty()) << "nothing started";
  EXPECT_EQ(p.list.started(), 0u);
}

}  // namespace
}  // namespace ferry::lifecycle
