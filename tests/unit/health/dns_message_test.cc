// The dns check's wire format: the query bytes it builds, and its verdict on replies, malformed
// ones included.
#include "lib/health/dns_message.hh"

#include <gtest/gtest.h>

#include <vector>

namespace ferry::health {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes query(std::uint16_t id = 0xbeef, std::string_view name = "example.org",
            std::uint16_t qtype = 1) {
  auto q = build_dns_query(id, name, qtype);
  EXPECT_TRUE(q);
  return q.value_or(Bytes{});
}

// The reply a server would send: the query with QR set, flags and counts as given.
Bytes reply_to(const Bytes& q, std::uint16_t flags = 0x8180, std::uint16_t qdcount = 1) {
  Bytes r = q;
  r[2] = static_cast<std::uint8_t>(flags >> 8);
  r[3] = static_cast<std::uint8_t>(flags);
  r[4] = static_cast<std::uint8_t>(qdcount >> 8);
  r[5] = static_cast<std::uint8_t>(qdcount);
  return r;
}

TEST(DnsQuery, IsAHeaderWithRdAndOneInQuestionOfLengthPrefixedLabels) {
  Bytes expected = {0xbe, 0xef, 0x01, 0x00, 0,   1, 0,   0,   0,   0, 0, 0,  7, 'e', 'x',
                    'a',  'm',  'p',  'l',  'e', 3, 'o', 'r', 'g', 0, 0, 28, 0, 1};
  EXPECT_EQ(query(0xbeef, "example.org", 28), expected);
  EXPECT_EQ(query(0xbeef, "example.org.", 28), expected);  // the trailing dot changes nothing
}

TEST(DnsQuery, TheRootIsASingleZeroLabel) {
  Bytes expected = {0, 7, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1};
  EXPECT_EQ(query(7, ".", 2), expected);
}

TEST(DnsQuery, RefusesNamesThatCannotBeEncoded) {
  EXPECT_FALSE(build_dns_query(1, "", 1));
  EXPECT_FALSE(build_dns_query(1, "a..b", 1));
  EXPECT_FALSE(build_dns_query(1, ".a", 1));
  EXPECT_FALSE(build_dns_query(1, std::string(64, 'a'), 1));
  EXPECT_TRUE(build_dns_query(1, std::string(63, 'a'), 1));
  std::string long_name;
  for (int i = 0; i < 4; ++i) long_name += std::string(63, 'a') + ".";
  EXPECT_FALSE(build_dns_query(1, long_name, 1));  // 4 x 64 + 1 > 255 bytes
}

TEST(DnsReply, AnAnswerWithTheQueryIdAndQuestionCarriesItsRcode) {
  Bytes q = query();
  DnsReply r = parse_dns_reply(reply_to(q, 0x8182), q);  // SERVFAIL
  EXPECT_EQ(r.kind, DnsReply::Kind::answer);
  EXPECT_EQ(r.rcode, 2);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(dns_rcode_text(r.rcode), "SERVFAIL");
  EXPECT_EQ(dns_rcode_text(9), "RCODE 9");
}

TEST(DnsReply, QuestionNamesCompareCaseInsensitively) {
  Bytes q = query();
  Bytes r = reply_to(q);
  r[13] = 'E';
  EXPECT_EQ(parse_dns_reply(r, q).kind, DnsReply::Kind::answer);
}

TEST(DnsReply, TruncatedIsAnAnswerEvenWhenCutInsideTheQuestion) {
  Bytes q = query();
  Bytes r = reply_to(q, 0x8380);  // TC
  r.resize(14);
  DnsReply d = parse_dns_reply(r, q);
  EXPECT_EQ(d.kind, DnsReply::Kind::answer);
  EXPECT_TRUE(d.truncated);
}

TEST(DnsReply, AnotherIdOrAnotherQuestionIsNotOurs) {
  Bytes q = query();
  Bytes r = reply_to(q);
  r[1] ^= 1;
  EXPECT_EQ(parse_dns_reply(r, q).kind, DnsReply::Kind::not_ours);
  r = reply_to(q);
  r.end()[-3] = 2;  // QTYPE NS instead of A
  EXPECT_EQ(parse_dns_reply(r, q).kind, DnsReply::Kind::not_ours);
}

TEST(DnsReply, NoQuestionAtAllIsStillAnAnswer) {
  Bytes q = query();
  Bytes r(q.begin(), q.begin() + 12);
  r = reply_to(r, 0x8181, 0);  // FORMERR without the question, as some servers send
  DnsReply d = parse_dns_reply(r, q);
  EXPECT_EQ(d.kind, DnsReply::Kind::answer);
  EXPECT_EQ(d.rcode, 1);
}

TEST(DnsReply, MalformedRepliesWithOurIdSayWhy) {
  Bytes q = query();
  auto why = [&](const Bytes& r) {
    DnsReply d = parse_dns_reply(r, q);
    EXPECT_EQ(d.kind, DnsReply::Kind::malformed);
    return d.why;
  };
  EXPECT_EQ(why(Bytes{}), "reply of 0 bytes is shorter than a DNS header");
  EXPECT_EQ(why(Bytes{0xbe}), "reply of 1 bytes is shorter than a DNS header");
  EXPECT_EQ(why(Bytes(q.begin(), q.begin() + 11)),
            "reply of 11 bytes is shorter than a DNS header");
  EXPECT_EQ(why(reply_to(q, 0x0100)), "not a response (QR is 0)");
  EXPECT_EQ(why(reply_to(q, 0x8980)), "opcode 1 is not QUERY");
  EXPECT_EQ(why(reply_to(q, 0x8180, 2)), "2 questions in the reply");
  Bytes cut = reply_to(q);
  cut.resize(16);
  EXPECT_EQ(why(cut), "reply ends inside its question");
}

}  // namespace
}  // namespace ferry::health
