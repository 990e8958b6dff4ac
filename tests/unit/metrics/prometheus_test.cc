// The Prometheus text and JSON encoders, checked against exact expected output and promtool.
#include "lib/metrics/prometheus.hh"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "lib/metrics/process_metrics.hh"

namespace ferry::metrics {
namespace {

// One family of each kind, with the awkward cases: escapes, no labels, no samples.
Snapshot representative_snapshot() {
  SnapshotBuilder b;
  b.counter("ferry_rx_packets_total", "Packets received.\nBy \\queue\\.",
            {{"iface", "eth0"}, {"queue", "0"}}, 12345678901);
  b.counter("ferry_rx_packets_total", "Packets received.\nBy \\queue\\.",
            {{"iface", "we\"ird\\name\n"}, {"queue", "1"}}, 0);
  b.gauge("ferry_workers", "Worker threads running.", {}, 2);
  b.gauge("ferry_load_ratio", "Share of busy polls.", {{"worker", "0"}}, 0.1);
  b.histogram("ferry_request_duration_seconds", "Time to serve one request.", {{"service", "dns"}},
              HistogramValue{{{0.005, 3}, {0.5, 7}, {10, 9}}, 4.25, 10});
  b.declare("ferry_backends_up", "Backends passing health checks.", Type::gauge);
  return std::move(b).finish();
}

TEST(EncodePrometheus, WritesExactTextFormat) {
  const std::string expected =
      "# HELP ferry_backends_up Backends passing health checks.\n"
      "# TYPE ferry_backends_up gauge\n"
      "# HELP ferry_load_ratio Share of busy polls.\n"
      "# TYPE ferry_load_ratio gauge\n"
      "ferry_load_ratio{worker=\"0\"} 0.1\n"
      "# HELP ferry_request_duration_seconds Time to serve one request.\n"
      "# TYPE ferry_request_duration_seconds histogram\n"
      "ferry_request_duration_seconds_bucket{service=\"dns\",le=\"0.005\"} 3\n"
      "ferry_request_duration_seconds_bucket{service=\"dns\",le=\"0.5\"} 7\n"
      "ferry_request_duration_seconds_bucket{service=\"dns\",le=\"10\"} 9\n"
      "ferry_request_duration_seconds_bucket{service=\"dns\",le=\"+Inf\"} 10\n"
      "ferry_request_duration_seconds_sum{service=\"dns\"} 4.25\n"
      "ferry_request_duration_seconds_count{service=\"dns\"} 10\n"
      "# HELP ferry_rx_packets_total Packets received.\\nBy \\\\queue\\\\.\n"
      "# TYPE ferry_rx_packets_total counter\n"
      "ferry_rx_packets_total{iface=\"eth0\",queue=\"0\"} 12345678901\n"
      "ferry_rx_packets_total{iface=\"we\\\"ird\\\\name\\n\",queue=\"1\"} 0\n"
      "# HELP ferry_workers Worker threads running.\n"
      "# TYPE ferry_workers gauge\n"
      "ferry_workers 2\n";
  EXPECT_EQ(encode_prometheus(representative_snapshot()), expected);
}

TEST(EncodePrometheus, EmptySnapshotIsEmptyText) {
  EXPECT_EQ(encode_prometheus({}), "");
}

TEST(EncodePrometheus, HistogramWithoutLabelsOrBucketsStillHasInfSumAndCount) {
  SnapshotBuilder b;
  b.histogram("ferry_wait_seconds", "Wait.", {}, HistogramValue{{}, 0, 0});
  EXPECT_EQ(encode_prometheus(std::move(b).finish()),
            "# HELP ferry_wait_seconds Wait.\n"
            "# TYPE ferry_wait_seconds histogram\n"
            "ferry_wait_seconds_bucket{le=\"+Inf\"} 0\n"
            "ferry_wait_seconds_sum 0\n"
            "ferry_wait_seconds_count 0\n");
}

// The value column of a single unlabelled gauge.
std::string formatted(double v) {
  SnapshotBuilder b;
  b.gauge("ferry_v", "v", {}, v);
  std::string text = encode_prometheus(std::move(b).finish());
  std::string prefix = "\nferry_v ";
  auto at = text.find(prefix);
  return text.substr(at + prefix.size(), text.size() - at - prefix.size() - 1);
}

TEST(EncodePrometheus, FormatsValuesAsIntegersOrRoundTrippingDecimals) {
  EXPECT_EQ(formatted(0), "0");
  EXPECT_EQ(formatted(-0.0), "0");
  EXPECT_EQ(formatted(12345678901), "12345678901");
  EXPECT_EQ(formatted(1e19), "10000000000000000000");
  EXPECT_EQ(formatted(18446744073709549568.0), "18446744073709549568");  // largest below 2^64
  EXPECT_EQ(formatted(-42), "-42");
  EXPECT_EQ(formatted(0.5), "0.5");
  EXPECT_EQ(formatted(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(std::stod(formatted(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(std::stod(formatted(1e-9)), 1e-9);
  EXPECT_EQ(std::stod(formatted(1e300)), 1e300);
  EXPECT_EQ(formatted(INFINITY), "+Inf");
  EXPECT_EQ(formatted(-INFINITY), "-Inf");
  EXPECT_EQ(formatted(NAN), "NaN");
}

TEST(EncodeJson, ListsFamiliesWithSamplesAndHistograms) {
  nlohmann::json expected = nlohmann::json::parse(R"({"metrics":[
    {"name":"ferry_backends_up","type":"gauge","help":"Backends passing health checks.",
     "samples":[]},
    {"name":"ferry_load_ratio","type":"gauge","help":"Share of busy polls.",
     "samples":[{"labels":{"worker":"0"},"value":0.1}]},
    {"name":"ferry_request_duration_seconds","type":"histogram",
     "help":"Time to serve one request.",
     "samples":[{"labels":{"service":"dns"},"buckets":[[0.005,3],[0.5,7],[10,9]],
                 "sum":4.25,"count":10}]},
    {"name":"ferry_rx_packets_total","type":"counter","help":"Packets received.\nBy \\queue\\.",
     "samples":[{"labels":{"iface":"eth0","queue":"0"},"value":12345678901},
                {"labels":{"iface":"we\"ird\\name\n","queue":"1"},"value":0}]},
    {"name":"ferry_workers","type":"gauge","help":"Worker threads running.",
     "samples":[{"labels":{},"value":2}]}]})");
  nlohmann::json actual = encode_json(representative_snapshot());
  EXPECT_EQ(actual, expected) << actual.dump(2);
  // Integral values are JSON integers, so clients can read counters exactly.
  EXPECT_TRUE(actual["metrics"][3]["samples"][0]["value"].is_number_integer());
}

TEST(EncodeJson, SpellsNonFiniteValuesAsStrings) {
  SnapshotBuilder b;
  b.gauge("ferry_g", "g", {{"k", "inf"}}, INFINITY);
  b.gauge("ferry_g", "g", {{"k", "-inf"}}, -INFINITY);
  b.gauge("ferry_g", "g", {{"k", "nan"}}, NAN);
  nlohmann::json samples = encode_json(std::move(b).finish())["metrics"][0]["samples"];
  EXPECT_EQ(samples[0]["value"], "+Inf");
  EXPECT_EQ(samples[1]["value"], "-Inf");
  EXPECT_EQ(samples[2]["value"], "NaN");
}

TEST(EncodePrometheus, PassesPromtoolCheckMetrics) {
  const char* promtool = "/usr/bin/promtool";
  ASSERT_EQ(::access(promtool, X_OK), 0) << "install the Debian 'prometheus' package for promtool";
  Registry registry;
  auto process = register_process_metrics(registry, "0.1.0-test", 1700000000.25);
  auto rest = registry.add([](SnapshotBuilder& b) {
    for (Family& f : representative_snapshot()) {
      for (Sample& s : f.samples) {
        switch (f.type) {
          case Type::counter:
            b.counter(f.name, f.help, s.labels, s.value);
            break;
          case Type::gauge:
            b.gauge(f.name, f.help, s.labels, s.value);
            break;
          case Type::histogram:
            b.histogram(f.name, f.help, s.labels, s.histogram);
            break;
        }
      }
      b.declare(f.name, f.help, f.type);
    }
  });
  std::string text = encode_prometheus(registry.snapshot());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');

  char path[] = "/tmp/ferry_promtool_XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  std::string command = std::string(promtool) + " check metrics < " + path + " 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  int status = ::pclose(pipe);
  ::unlink(path);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool said:\n" << output << "\nabout:\n" << text;
}

}  // namespace
}  // namespace ferry::metrics
