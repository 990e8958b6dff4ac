// `ferryctl watch`: counter rates between snapshots, throughput totals, the frame text, and the
// loop against a fake ferryd.
#include "lib/ctl/watch.hh"

#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <string>

#include "tests/unit/ctl/fake_daemon.hh"

namespace ferry::ctl {
namespace {

using nlohmann::json;
using testing::FakeDaemon;
using testing::occurrences;
using testing::ok_response;

json counter(const std::string& name, json labels, double value) {
  return {{"name", name},
          {"type", "counter"},
          {"help", "h"},
          {"samples", json::array({{{"labels", std::move(labels)}, {"value", value}}})}};
}

json stats_of(json families) {
  return {{"metrics", std::move(families)}};
}

const std::string kRx = series_key("ferry_rx_packets_total", json{{"queue", "0"}});
const std::string kRxFamily = "ferry_xsk_rx_packets_total";

TEST(ComputeRates, DividesTheCounterDeltaByElapsedSeconds) {
  json before = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 1000)});
  json after = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 1600)});
  SeriesRates rates = compute_rates(before, after, 2.0);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_DOUBLE_EQ(rates.at(kRx), 300.0);
}

TEST(ComputeRates, MatchesSeriesByNameAndLabels) {
  json before = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 10),
                          counter("ferry_rx_packets_total", {{"queue", "1"}}, 100)});
  json after = stats_of({counter("ferry_rx_packets_total", {{"queue", "1"}}, 150),
                         counter("ferry_rx_packets_total", {{"queue", "0"}}, 20)});
  SeriesRates rates = compute_rates(before, after, 1.0);
  EXPECT_DOUBLE_EQ(rates.at(kRx), 10.0);
  EXPECT_DOUBLE_EQ(rates.at(series_key("ferry_rx_packets_total", json{{"queue", "1"}})), 50.0);
}

TEST(ComputeRates, TreatsACounterThatWentDownAsResetToZero) {
  json before = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 5000)});
  json after = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 40)});
  SeriesRates rates = compute_rates(before, after, 0.5);
  EXPECT_DOUBLE_EQ(rates.at(kRx), 80.0);  // never negative: 40 counted since the reset
}

TEST(ComputeRates, GivesANewSeriesNoRate) {
  json before = stats_of(json::array());
  json after = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 40)});
  EXPECT_TRUE(compute_rates(before, after, 1.0).empty());
}

TEST(ComputeRates, IgnoresGaugesHistogramsAndZeroElapsedTime) {
  json gauge = {{"name", "ferry_connections"},
                {"type", "gauge"},
                {"samples", json::array({{{"labels", json::object()}, {"value", 3}}})}};
  json gauge_later = gauge;
  gauge_later["samples"][0]["value"] = 9;
  EXPECT_TRUE(compute_rates(stats_of({gauge}), stats_of({gauge_later}), 1.0).empty());
  json before = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 1)});
  json after = stats_of({counter("ferry_rx_packets_total", {{"queue", "0"}}, 2)});
  EXPECT_TRUE(compute_rates(before, after, 0.0).empty());
  EXPECT_TRUE(compute_rates(before, after, -1.0).empty());
}

TEST(StatsIndex, SumsValuesAndRatesOfTheSeriesWithTheGivenLabels) {
  json stats = stats_of({counter("ferry_proxy_bytes_in_total", {{"service", "web"}}, 10),
                         counter("ferry_proxy_bytes_in_total", {{"service", "api"}}, 20),
                         counter("ferry_drops_total", {{"service", "web"}, {"reason", "a"}}, 1),
                         counter("ferry_drops_total", {{"service", "web"}, {"reason", "b"}}, 2)});
  SeriesRates rates = {
      {series_key("ferry_proxy_bytes_in_total", json{{"service", "web"}}), 5},
      {series_key("ferry_drops_total", json{{"reason", "a"}, {"service", "web"}}), 0.5},
      {series_key("ferry_drops_total", json{{"reason", "b"}, {"service", "web"}}), 1.5},
  };
  StatsIndex index(stats, &rates);
  EXPECT_EQ(index.value("ferry_proxy_bytes_in_total"), 30);
  EXPECT_EQ(index.value("ferry_proxy_bytes_in_total", {{"service", "api"}}), 20);
  EXPECT_EQ(index.rate("ferry_proxy_bytes_in_total", {{"service", "web"}}), 5);
  EXPECT_EQ(index.rate("ferry_proxy_bytes_in_total", {{"service", "api"}}), std::nullopt)
      << "a series without a rate yet is not a rate of 0";
  EXPECT_EQ(index.value("ferry_proxy_bytes_in_total", {{"service", "none"}}), std::nullopt);
  EXPECT_EQ(index.rate("ferry_drops_total", {{"service", "web"}}), 2);
  auto by_reason = index.rates_by("ferry_drops_total", "reason", {{"service", "web"}});
  EXPECT_EQ(by_reason, (std::map<std::string, double>{{"a", 0.5}, {"b", 1.5}}));
  EXPECT_EQ(StatsIndex(stats, nullptr).rate("ferry_drops_total"), std::nullopt);
}

TEST(GatewayTraffic, IsTheFastPathsFramesAndTheProxysBytesInBits) {
  json stats = stats_of({counter("ferry_xsk_rx_packets_total", {{"queue", "0"}}, 0),
                         counter("ferry_xsk_rx_packets_total", {{"queue", "1"}}, 0),
                         counter("ferry_xsk_rx_bytes_total", {{"queue", "0"}}, 0),
                         counter("ferry_xsk_tx_packets_total", {{"queue", "0"}}, 0),
                         counter("ferry_xsk_tx_bytes_total", {{"queue", "0"}}, 0),
                         counter("ferry_proxy_bytes_in_total", {{"service", "web"}}, 0),
                         counter("ferry_proxy_bytes_out_total", {{"service", "web"}}, 0),
                         counter("ferry_xdp_packets_total", {{"action", "pass"}}, 0)});
  SeriesRates rates = {
      {series_key("ferry_xsk_rx_packets_total", json{{"queue", "0"}}), 1000},
      {series_key("ferry_xsk_rx_packets_total", json{{"queue", "1"}}), 500},
      {series_key("ferry_xsk_rx_bytes_total", json{{"queue", "0"}}), 125000},
      {series_key("ferry_xsk_tx_packets_total", json{{"queue", "0"}}), 1400},
      {series_key("ferry_xsk_tx_bytes_total", json{{"queue", "0"}}), 120000},
      {series_key("ferry_proxy_bytes_in_total", json{{"service", "web"}}), 400},
      {series_key("ferry_proxy_bytes_out_total", json{{"service", "web"}}), 5e6},
      {series_key("ferry_xdp_packets_total", json{{"action", "pass"}}), 7},
  };
  Traffic t = gateway_traffic(StatsIndex(stats, &rates));
  EXPECT_EQ(t.fastpath_rx_pps, 1500);
  EXPECT_EQ(t.fastpath_rx_bps, 1e6);
  EXPECT_EQ(format_traffic(t),
            "fast path rx 1.50 kpps 1.00 Mbps, tx 1.40 kpps 960 kbps  proxy in 3.20 kbps, out 40.0 Mbps");
  EXPECT_EQ(format_traffic(gateway_traffic(StatsIndex(stats, nullptr))),
            "fast path rx - pps - bps, tx - pps - bps  proxy in - bps, out - bps");
  EXPECT_EQ(format_traffic(gateway_traffic(StatsIndex(stats_of(json::array()), nullptr))), "")
      << "a ferryd with neither a fast path nor a proxy";
}

const json kStatus = json::parse(R"({"pid":1234,"uptime_seconds":3723.9,"state":"running"})");

TEST(WatchFrame, FirstSnapshotShowsDashesForRates) {
  json stats = stats_of({counter("ferry_xsk_rx_packets_total", {{"queue", "0"}}, 1000)});
  EXPECT_EQ(render_watch_frame("20:00:01", kStatus, stats, stats, nullptr),
            "20:00:01  ferryd pid 1234  up 1h 2m 3s  fast path rx - pps - bps, tx - pps - bps\n"
            "\n"
            "METRIC                      LABELS   VALUE  RATE/s\n"
            "ferry_xsk_rx_packets_total  queue=0   1000       -\n");
}

TEST(WatchFrame, TheHeaderCountsTrafficTheTableDoesNotShow) {
  json shown = stats_of({counter("ferry_control_requests_total", json::object(), 7)});
  json stats = stats_of({counter("ferry_xsk_rx_packets_total", {{"queue", "0"}}, 1600),
                         counter("ferry_xsk_rx_bytes_total", {{"queue", "0"}}, 96000),
                         counter("ferry_control_requests_total", json::object(), 7)});
  SeriesRates rates = {{series_key("ferry_xsk_rx_packets_total", json{{"queue", "0"}}), 300},
                       {series_key("ferry_xsk_rx_bytes_total", json{{"queue", "0"}}), 15000},
                       {series_key("ferry_control_requests_total", json::object()), 1}};
  EXPECT_EQ(render_watch_frame("20:00:02", kStatus, stats, shown, &rates),
            "20:00:02  ferryd pid 1234  up 1h 2m 3s  fast path rx 300 pps 120 kbps, tx - pps - bps\n"
            "\n"
            "METRIC                        LABELS  VALUE  RATE/s\n"
            "ferry_control_requests_total              7       1\n");
}

// A daemon whose rx counter grows by 100 per stats request.
class CountingDaemon {
 public:
  CountingDaemon()
      : daemon_([this](const json& request) {
          if (request["cmd"] == "status") return ok_response(kStatus);
          double value = 100.0 * ++stats_calls_;
          return ok_response(stats_of({counter(kRxFamily, {{"queue", "0"}}, value),
                                       counter("ferry_control_requests_total", json::object(), 1)}));
        }) {}
  FakeDaemon& daemon() { return daemon_; }

 private:
  std::atomic<int> stats_calls_{0};
  FakeDaemon daemon_;
};

TEST(RunWatch, ShowsCountSnapshotsOnOneConnectionSeparatedByBlankLines) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  WatchOptions options;
  options.prefix = "ferry_xsk_rx_";
  options.prefixes = {"ferry_xsk_rx_"};
  options.interval_ms = 1;
  options.count = 3;
  std::ostringstream out;
  run_watch(client, options, out);

  std::string text = out.str();
  EXPECT_EQ(occurrences(text, "ferryd pid 1234  up 1h 2m 3s"), 3u);
  EXPECT_EQ(occurrences(text, "\n\nMETRIC"), 3u);
  EXPECT_EQ(occurrences(text, "\n\n"), 5u);  // 3 header gaps + 2 frame separators
  EXPECT_EQ(text.find("\x1b["), std::string::npos);
  EXPECT_NE(text.find("queue=0    100       -\n"), std::string::npos) << text;
  EXPECT_EQ(occurrences(text, "rx - pps"), 1u) << "only the first frame lacks a rate";
  EXPECT_EQ(text.find("ferry_control_requests_total"), std::string::npos) << "not asked for";

  // ferryd sends every family: the header's traffic is not limited to what is shown.
  auto requests = counting.daemon().requests();
  ASSERT_EQ(requests.size(), 6u);
  for (std::size_t i = 0; i < requests.size(); i += 2) {
    EXPECT_EQ(requests[i]["cmd"], "status");
    EXPECT_EQ(requests[i + 1]["cmd"], "stats");
    EXPECT_FALSE(requests[i + 1].contains("args") && requests[i + 1]["args"].contains("prefix"));
  }
  EXPECT_EQ(counting.daemon().connections(), 1);
}

TEST(RunWatch, ClearsTheScreenBeforeEachFrameOnATerminal) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  WatchOptions options;
  options.interval_ms = 1;
  options.count = 2;
  options.clear_screen = true;
  std::ostringstream out;
  run_watch(client, options, out);
  EXPECT_EQ(out.str().rfind("\x1b[H\x1b[2J", 0), 0u);
  EXPECT_EQ(occurrences(out.str(), "\x1b[H\x1b[2J"), 2u);
}

TEST(RunWatch, StopsWhenAskedBetweenSnapshots) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  std::ostringstream out;
  WatchOptions options;
  options.interval_ms = 1;
  options.stop_requested = [&] { return !out.str().empty(); };  // Ctrl-C after the first frame
  run_watch(client, options, out);
  EXPECT_EQ(occurrences(out.str(), "ferryd pid 1234"), 1u);
}

TEST(RunWatch, JsonPrintsOneCompactStatsResponsePerLine) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  WatchOptions options;
  options.interval_ms = 1;
  options.count = 2;
  options.json = true;
  std::ostringstream out;
  run_watch(client, options, out);
  std::istringstream lines(out.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    json response = json::parse(line);
    EXPECT_EQ(response["ok"], true);
    EXPECT_EQ(response["result"]["metrics"][0]["samples"][0]["value"], 100.0 * ++n);
  }
  EXPECT_EQ(n, 2);
}

TEST(RunWatch, DaemonErrorEndsTheWatchWithExitCode1) {
  FakeDaemon daemon(
      [](const json&) { return testing::error_response("bad_args", "prefix must be a string"); });
  Client client = Client::connect(daemon.socket_path(), 1000);
  WatchOptions options;
  options.count = 1;
  std::ostringstream out;
  try {
    run_watch(client, options, out);
    ADD_FAILURE() << "no error";
  } catch (const CtlError& e) {
    EXPECT_EQ(e.exit_code(), ExitCode::daemon_error);
    EXPECT_STREQ(e.what(), "bad_args: prefix must be a string");
  }
}

}  // namespace
}  // namespace ferry::ctl
