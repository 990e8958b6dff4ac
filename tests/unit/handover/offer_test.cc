// The typed handover offer: parts round-trip with their fields, bytes and named fds; an offer of
// another schema, a missing part and fd numbers that do not fit are refused with the reason.
#include "lib/handover/offer.hh"

#include <gtest/gtest.h>

#include "tests/unit/support/handover_support.hh"

namespace ferry::handover {
namespace {

using nlohmann::json;

using test::inode_of;
using test::received;
using test::stand_in;

Offer two_planes() {
  Offer offer;
  offer.version = "9.9.9";
  offer.from_pid = 4242;
  OfferPart& control = offer.part("control");
  control.put_fd("unix", stand_in("unix"));
  control.fields = {{"socket", "/run/ferry/ferryd.sock"}};
  OfferPart& fastpath = offer.part("fastpath");
  fastpath.put_fd("umem", stand_in("umem"));
  fastpath.put_fd("xsk:0:0", stand_in("xsk"));
  fastpath.bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  offer.part("health").fields = {{"backends", json::array({"a", "b"})}};
  return offer;
}

TEST(HandoverOffer, EveryPartRoundTripsWithItsFieldsBytesAndNamedFds) {
  Offer sent = two_planes();
  Offer::Wire wire = sent.encode();
  EXPECT_EQ(wire.head["schema"], kOfferSchema);
  ASSERT_EQ(wire.fds.size(), 3u);

  Offer got = Offer::decode(received(wire), "offer");
  EXPECT_EQ(got.version, "9.9.9");
  EXPECT_EQ(got.from_pid, 4242);
  EXPECT_EQ(got.planes(), (std::vector<std::string>{"control", "fastpath", "health"}));
  EXPECT_EQ(got.fd_count(), 3u);
  OfferPart control = got.take_part("control");
  EXPECT_EQ(control.fields["socket"], "/run/ferry/ferryd.sock");
  UniqueFd unix_fd = control.require_fd("unix");
  EXPECT_EQ(inode_of(unix_fd.get()), inode_of(sent.part("control").fds().at("unix").get()));
  EXPECT_FALSE(control.take_fd("tcp")) << "a fd the part never had is none";
  OfferPart fastpath = got.take_part("fastpath");
  EXPECT_EQ(fastpath.bytes, sent.part("fastpath").bytes);
  EXPECT_EQ(inode_of(fastpath.require_fd("xsk:0:0").get()),
            inode_of(sent.part("fastpath").fds().at("xsk:0:0").get()));
  EXPECT_EQ(got.take_part("health").fields, sent.part("health").fields);
}

TEST(HandoverOffer, APlaneMissingFromTheOfferIsRefusedByName) {
  Offer got = Offer::decode(received(two_planes().encode()), "offer");
  try {
    got.take_part("announce");
    FAIL() << "no announce part, yet taken";
  } catch (const OfferError& e) {
    EXPECT_NE(std::string(e.what()).find("no part for the announce plane"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("9.9.9"), std::string::npos) << e.what();
  }
}

TEST(HandoverOffer, AnOfferWithoutOrOfAnotherSchemaIsRefusedWithTheReason) {
  const Offer sent = two_planes();  // owns the fds the wire numbers
  const Offer::Wire wire = sent.encode();
  // The offer of the ferryd before typed offers: no schema, fds numbered in place.
  Message old{json{{"type", "offer"},
                   {"version", "0.0.9"},
                   {"from_pid", 7},
                   {"control", {{"unix", 0}, {"tcp", -1}}}},
              {},
              {}};
  old.fds.push_back(stand_in("unix"));
  try {
    Offer::decode(std::move(old), "offer");
    FAIL() << "an offer without a schema was read";
  } catch (const OfferError& e) {
    EXPECT_NE(std::string(e.what()).find("version 0.0.9, pid 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("without a schema"), std::string::npos) << e.what();
  }
  Message newer = received(wire);
  newer.head["schema"] = kOfferSchema + 1;
  try {
    Offer::decode(std::move(newer), "offer");
    FAIL() << "an offer of another schema was read";
  } catch (const OfferError& e) {
    EXPECT_NE(std::string(e.what()).find("schema " + std::to_string(kOfferSchema + 1)),
              std::string::npos)
        << e.what();
  }
}

TEST(HandoverOffer, AnotherStageIsRefused) {
  EXPECT_THROW(Offer::decode(received(two_planes().encode()), "paused"), OfferError);
}

TEST(HandoverOffer, FdNumbersAndByteRangesThatDoNotFitAreRefused) {
  const Offer sent = two_planes();  // owns the fds the wire numbers
  const Offer::Wire wire = sent.encode();
  auto with = [&](auto change) {
    Message m = received(wire);
    change(m);
    return m;
  };
  std::vector<std::pair<const char*, Message>> bad;
  bad.emplace_back("fd past the end",
                   with([](Message& m) { m.head["planes"]["control"]["fds"]["unix"] = 3; }));
  bad.emplace_back("fd used twice", with([](Message& m) {
                     m.head["planes"]["control"]["fds"]["unix"] =
                         m.head["planes"]["fastpath"]["fds"]["umem"];
                   }));
  bad.emplace_back("negative fd",
                   with([](Message& m) { m.head["planes"]["control"]["fds"]["unix"] = -1; }));
  bad.emplace_back("fds missing", with([](Message& m) { m.fds.pop_back(); }));
  bad.emplace_back("bytes past the end", with([](Message& m) {
                     m.head["planes"]["fastpath"]["bytes"] = {1, 3};
                   }));
  bad.emplace_back("no planes", with([](Message& m) { m.head.erase("planes"); }));
  for (auto& [what, m] : bad) {
    SCOPED_TRACE(what);
    EXPECT_THROW(Offer::decode(std::move(m), "offer"), OfferError);
  }
}

TEST(HandoverOffer, AFdNameGivenTwiceIsRefused) {
  OfferPart part;
  part.put_fd("unix", stand_in("a"));
  EXPECT_THROW(part.put_fd("unix", stand_in("b")), OfferError);
  EXPECT_THROW(part.require_fd("tcp"), OfferError);
}

}  // namespace
}  // namespace ferry::handover
