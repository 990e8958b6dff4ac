// The control protocol codec: what a request line may be, and the exact shape of responses.
#include "lib/control/protocol.hh"

#include <gtest/gtest.h>

#include <string>

namespace ferry::control {
namespace {

using nlohmann::json;

struct Rejection {
  std::string code;
  json id;
  std::string message;
};

// The CommandError decode_request throws for `line`, with the id it recovered.
Rejection rejection(std::string_view line) {
  json id = "untouched";
  try {
    decode_request(line, id);
  } catch (const CommandError& e) {
    return {e.code(), id, e.what()};
  }
  ADD_FAILURE() << "accepted: " << line;
  return {};
}

TEST(DecodeRequest, ReadsIdCmdAndArgs) {
  json id;
  Request r = decode_request(R"({"id":7,"cmd":"stats","args":{"prefix":"ferry_control"}})", id);
  EXPECT_EQ(id, 7);
  EXPECT_EQ(r.id, 7);
  EXPECT_EQ(r.cmd, "stats");
  EXPECT_EQ(r.args, (json{{"prefix", "ferry_control"}}));
}

TEST(DecodeRequest, IdAndArgsAreOptional) {
  json id = 5;
  Request r = decode_request(R"({"cmd":"status"})", id);
  EXPECT_TRUE(id.is_null());
  EXPECT_TRUE(r.id.is_null());
  EXPECT_EQ(r.args, json::object());

  Request with_nulls = decode_request(R"( {"id":null,"cmd":"status","args":null} )", id);
  EXPECT_TRUE(with_nulls.id.is_null());
  EXPECT_EQ(with_nulls.args, json::object());
}

TEST(DecodeRequest, AcceptsTheWholeInt64RangeAsId) {
  json id;
  decode_request(R"({"id":9223372036854775807,"cmd":"status"})", id);
  EXPECT_EQ(id.get<std::int64_t>(), INT64_MAX);
  decode_request(R"({"id":-9223372036854775808,"cmd":"status"})", id);
  EXPECT_EQ(id.get<std::int64_t>(), INT64_MIN);
  decode_request(R"({"id":0,"cmd":"status"})", id);
  EXPECT_EQ(id, 0);
}

TEST(DecodeRequest, RejectsIdsBeyondInt64OrNotIntegers) {
  for (const char* line : {R"({"id":9223372036854775808,"cmd":"status"})",
                           R"({"id":18446744073709551616,"cmd":"status"})",
                           R"({"id":-9223372036854775809,"cmd":"status"})",
                           R"({"id":1e400,"cmd":"status"})", R"({"id":1.5,"cmd":"status"})",
                           R"({"id":"7","cmd":"status"})", R"({"id":true,"cmd":"status"})",
                           R"({"id":[7],"cmd":"status"})", R"({"id":{},"cmd":"status"})"}) {
    Rejection r = rejection(line);
    EXPECT_EQ(r.code, "bad_request") << line;
    EXPECT_TRUE(r.id.is_null()) << line;
  }
}

TEST(DecodeRequest, RejectsLinesThatAreNotJsonObjects) {
  for (const char* line : {"", "status", "{", R"({"cmd":"status"} x)", "[]", "42", R"("status")",
                           "null", R"({"cmd":"status",})"}) {
    Rejection r = rejection(line);
    EXPECT_EQ(r.code, "bad_request") << line;
    EXPECT_TRUE(r.id.is_null()) << line;
  }
}

TEST(DecodeRequest, RejectsMissingOrMalformedCmdAndEchoesTheId) {
  for (const char* line :
       {R"({"id":3})", R"({"id":3,"cmd":7})", R"({"id":3,"cmd":null})", R"({"id":3,"cmd":""})",
        R"({"id":3,"cmd":"Status"})", R"({"id":3,"cmd":"stat-us"})", R"({"id":3,"cmd":"st4tus"})",
        R"({"id":3,"cmd":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})"}) {
    Rejection r = rejection(line);
    EXPECT_EQ(r.code, "bad_request") << line;
    EXPECT_EQ(r.id, 3) << line;
  }
  json id;
  EXPECT_EQ(decode_request(R"({"cmd":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})", id).cmd.size(), 32u);
}

TEST(DecodeRequest, RejectsUnknownTopLevelKeysAndEchoesTheId) {
  Rejection r = rejection(R"({"id":4,"cmd":"status","verbose":true})");
  EXPECT_EQ(r.code, "bad_request");
  EXPECT_EQ(r.id, 4);
  EXPECT_NE(r.message.find("verbose"), std::string::npos) << r.message;
}

TEST(DecodeRequest, ArgsOtherThanAnObjectAreBadArgs) {
  for (const char* line :
       {R"({"id":9,"cmd":"stats","args":[]})", R"({"id":9,"cmd":"stats","args":"ferry"})",
        R"({"id":9,"cmd":"stats","args":1})"}) {
    Rejection r = rejection(line);
    EXPECT_EQ(r.code, "bad_args") << line;
    EXPECT_EQ(r.id, 9) << line;
  }
}

TEST(DecodeRequest, RejectsInvalidUtf8) {
  Rejection r = rejection("{\"id\":1,\"cmd\":\"status\",\"args\":{\"x\":\"\xff\xfe\"}}");
  EXPECT_EQ(r.code, "bad_request");
  // The message quotes the offending bytes; encoding it must still work.
  std::string line = encode_error(r.id, r.code, r.message);
  EXPECT_NO_THROW(json::parse(line));
}

TEST(DecodeRequest, RejectsNestingDeeperThan32WithoutRecursingIntoIt) {
  std::string deep = R"({"cmd":"status","args":{"a":)" + std::string(31, '[') +
                     std::string(31, ']') + "}}";  // 33 levels
  EXPECT_EQ(rejection(deep).code, "bad_request");
  std::string at_limit = R"({"cmd":"status","args":{"a":)" + std::string(30, '[') +
                         std::string(30, ']') + "}}";  // 32 levels
  json id;
  EXPECT_NO_THROW(decode_request(at_limit, id));
  // A stack-exhausting line is refused by the pre-scan, not by the recursive parser.
  EXPECT_EQ(rejection(std::string(60000, '[')).code, "bad_request");
}

TEST(DecodeRequest, BracketsInsideStringsDoNotCountAsNesting) {
  json id;
  std::string line = R"({"cmd":"status","args":{"s":")" + std::string(100, '[') + R"(\"{{{"}})";
  Request r = decode_request(line, id);
  EXPECT_EQ(r.args["s"].get<std::string>().size(), 104u);
}

TEST(DecodeRequest, RejectsLinesOverTheSizeLimitAsTooLarge) {
  std::string line =
      R"({"cmd":"status","args":{"s":")" + std::string(kMaxRequestBytes, 'x') + "\"}}";
  EXPECT_EQ(rejection(line).code, "too_large");
}

TEST(EncodeResponse, ResultKeysInEnvelopeOrderOnOneLine) {
  EXPECT_EQ(encode_result(7, json{{"b", 1}, {"a", "x\ny"}}),
            R"({"id":7,"ok":true,"result":{"a":"x\ny","b":1}})");
  EXPECT_EQ(encode_result(nullptr, json{{"authenticated", true}}),
            R"({"id":null,"ok":true,"result":{"authenticated":true}})");
  EXPECT_EQ(encode_result(INT64_MIN, json::object()),
            R"({"id":-9223372036854775808,"ok":true,"result":{}})");
}

TEST(EncodeResponse, ErrorCarriesCodeAndMessage) {
  EXPECT_EQ(
      encode_error(3, "unknown_command", "unknown command 'x'; try 'help'"),
      R"({"id":3,"ok":false,"error":{"code":"unknown_command","message":"unknown command 'x'; try 'help'"}})");
}

TEST(EncodeResponse, NeverThrowsOnInvalidUtf8) {
  std::string line;
  ASSERT_NO_THROW(line = encode_error(nullptr, "bad_request", "bad \xff\xc3 bytes"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  json parsed = json::parse(line);
  EXPECT_EQ(parsed["error"]["message"], "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes");
  ASSERT_NO_THROW(line = encode_result(1, json{{"name", "\x80"}}));
  EXPECT_EQ(json::parse(line)["result"]["name"], "\xEF\xBF\xBD");
}

TEST(CommandName, IsOneTo32LowercaseLettersOrUnderscores) {
  EXPECT_TRUE(is_valid_command_name("reload"));
  EXPECT_TRUE(is_valid_command_name("_"));
  EXPECT_FALSE(is_valid_command_name(""));
  EXPECT_FALSE(is_valid_command_name("Reload"));
  EXPECT_FALSE(is_valid_command_name("re load"));
  EXPECT_FALSE(is_valid_command_name(std::string(33, 'a')));
}

}  // namespace
}  // namespace ferry::control
