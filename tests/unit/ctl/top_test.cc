// `ferryctl top`: which counters make each row's figures, the table and JSON renderings, and the
// loop against a fake ferryd.
#include "lib/ctl/top.hh"

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

json family(const std::string& name, const std::string& type, json samples) {
  return {{"name", name}, {"type", type}, {"help", "h"}, {"samples", std::move(samples)}};
}

json sample(json labels, double value) {
  return {{"labels", std::move(labels)}, {"value", value}};
}

json stats_of(std::initializer_list<json> families) {
  json list = json::array();
  for (const json& f : families) list.push_back(f);
  return {{"metrics", std::move(list)}};
}

const json kServices = json::parse(R"({"services":[
  {"name":"dns","vip":"10.0.0.10","port":53,"protocols":["udp"],"mode":"proxy",
   "paths":{"udp":"fastpath"},
   "backends":[{"address":"10.0.1.2:53","state":"up","up":true,"checked":true,"admin":"drain",
                "weight":2},
               {"address":"10.0.1.3:53","state":"down","up":false,"checked":true}]},
  {"name":"web","vip":"::1","port":80,"protocols":["tcp"],"mode":"proxy","paths":{"tcp":"proxy"},
   "backends":[{"address":"[::1]:8080","state":"unknown","up":true,"checked":false}]},
  {"name":"echo","vip":"127.0.0.1","port":7,"protocols":["tcp"],"mode":"echo",
   "paths":{"tcp":"echo"},"backends":[]},
  {"name":"mirror","vip":"10.0.0.11","port":9,"protocols":["udp"],"mode":"reflect",
   "paths":{"udp":"fastpath"},"backends":[]}]})");

json previous_stats() {
  return stats_of({
      family("ferry_xdp_service_packets_total", "counter",
             {sample({{"service", "dns"}, {"direction", "in"}}, 1000),
              sample({{"service", "dns"}, {"direction", "out"}}, 900)}),
      family("ferry_xdp_service_bytes_total", "counter",
             {sample({{"service", "dns"}, {"direction", "in"}}, 100000),
              sample({{"service", "dns"}, {"direction", "out"}}, 180000)}),
      family("ferry_proxy_bytes_in_total", "counter", {sample({{"service", "web"}}, 0)}),
      family("ferry_proxy_bytes_out_total", "counter", {sample({{"service", "web"}}, 0)}),
      family("ferry_proxy_connections_active", "gauge", {sample({{"service", "web"}}, 2)}),
      family("ferry_proxy_connections_refused_total", "counter",
             {sample({{"service", "web"}, {"reason", "service_limit"}}, 0),
              sample({{"service", "web"}, {"reason", "global_limit"}}, 0)}),
      family("ferry_proxy_connections_failed_total", "counter", {sample({{"service", "web"}}, 0)}),
      family("ferry_proxy_resets_total", "counter", {sample({{"service", "web"}}, 0)}),
      family("ferry_proxy_idle_timeouts_total", "counter", {sample({{"service", "web"}}, 0)}),
      family("ferry_proxy_accept_errors_total", "counter", {sample({{"service", "web"}}, 0)}),
      family("ferry_proxy_backend_bytes_in_total", "counter",
             {sample({{"service", "web"}, {"backend", "[::1]:8080"}}, 0)}),
      family("ferry_proxy_backend_bytes_out_total", "counter",
             {sample({{"service", "web"}, {"backend", "[::1]:8080"}}, 0)}),
      family("ferry_proxy_backend_connections_active", "gauge",
             {sample({{"service", "web"}, {"backend", "[::1]:8080"}}, 2)}),
      family("ferry_proxy_backend_connect_failures_total", "counter",
             {sample({{"service", "web"}, {"backend", "[::1]:8080"}}, 0)}),
      family("ferry_tcp_echo_bytes_total", "counter", {sample({{"service", "echo"}}, 0)}),
      family("ferry_tcp_connections_open", "gauge", {sample({{"service", "echo"}}, 0)}),
      family("ferry_tcp_accept_errors_total", "counter", {sample({{"service", "echo"}}, 0)}),
      family("ferry_xsk_rx_packets_total", "counter", {sample({{"queue", "0"}}, 0)}),
      family("ferry_xsk_drops_total", "counter",
             {sample({{"queue", "0"}, {"reason", "no_backend"}}, 0),
              sample({{"queue", "1"}, {"reason", "no_backend"}}, 0),
              sample({{"queue", "0"}, {"reason", "tx_ring_full"}}, 0)}),
      family("ferry_xsk_kernel_drops_total", "counter",
             {sample({{"queue", "0"}, {"reason", "rx_ring_full"}}, 0)}),
      family("ferry_xdp_packets_total", "counter", {sample({{"action", "drop"}}, 0)}),
  });
}

// One second later: dns took 500 requests of 100 bytes and sent 450 replies of 200 bytes; web
// moved 1000 bytes in and 125000 out, refused 3 (service_limit), failed 1, reset 4 of which 2
// were idle timeouts; echo echoed 250 bytes; the fast path dropped 5 + 2 + 1 frames, the kernel 4.
json current_stats() {
  json s = previous_stats();
  auto set = [&](const std::string& name, std::size_t i, double value) {
    for (json& f : s["metrics"]) {
      if (f["name"] == name) f["samples"][i]["value"] = value;
    }
  };
  set("ferry_xdp_service_packets_total", 0, 1500);
  set("ferry_xdp_service_packets_total", 1, 1350);
  set("ferry_xdp_service_bytes_total", 0, 150000);
  set("ferry_xdp_service_bytes_total", 1, 270000);
  set("ferry_proxy_bytes_in_total", 0, 1000);
  set("ferry_proxy_bytes_out_total", 0, 125000);
  set("ferry_proxy_connections_refused_total", 0, 3);
  set("ferry_proxy_connections_failed_total", 0, 1);
  set("ferry_proxy_resets_total", 0, 4);
  set("ferry_proxy_idle_timeouts_total", 0, 2);
  set("ferry_proxy_backend_bytes_in_total", 0, 1000);
  set("ferry_proxy_backend_bytes_out_total", 0, 125000);
  set("ferry_tcp_echo_bytes_total", 0, 250);
  set("ferry_xsk_rx_packets_total", 0, 1950);
  set("ferry_xsk_drops_total", 0, 5);
  set("ferry_xsk_drops_total", 1, 2);
  set("ferry_xsk_drops_total", 2, 1);
  set("ferry_xsk_kernel_drops_total", 0, 4);
  return s;
}

struct Snapshots {
  json before = previous_stats();
  json after = current_stats();
  SeriesRates rates = compute_rates(before, after, 1.0);
  StatsIndex index{after, &rates};
};

const TopRow& find_row(const TopView& view, const std::string& service) {
  for (const TopRow& row : view.rows) {
    if (row.service == service) return row;
  }
  throw std::runtime_error("no row " + service);
}

TEST(TopView, UdpRowsAreTheXdpProgramsFramesEachWay) {
  Snapshots s;
  TopView view = build_top_view(kServices, s.index, TopSort::name);
  const TopRow& dns = find_row(view, "dns");
  EXPECT_EQ(dns.protocol, "udp");
  EXPECT_EQ(dns.endpoint, "10.0.0.10:53");
  EXPECT_EQ(dns.path, "fastpath");
  EXPECT_EQ(dns.backends_up, 1);
  EXPECT_EQ(dns.backends_total, 2);
  EXPECT_EQ(dns.figures.in_pps, 500);
  EXPECT_EQ(dns.figures.in_bps, 400000);
  EXPECT_EQ(dns.figures.out_pps, 450);
  EXPECT_EQ(dns.figures.out_bps, 720000);
  EXPECT_EQ(dns.figures.active, std::nullopt) << "the UDP path keeps no flows";
  EXPECT_EQ(dns.figures.drops_per_second, std::nullopt) << "drops are the fast path's";
  ASSERT_EQ(dns.backends.size(), 2u);
  EXPECT_EQ(dns.backends[1].state, "down");
  EXPECT_EQ(dns.backends[1].figures.in_bps, std::nullopt);

  const TopRow& mirror = find_row(view, "mirror");
  EXPECT_EQ(mirror.path, "fastpath reflect");
  EXPECT_EQ(mirror.backends_total, std::nullopt);
  EXPECT_EQ(mirror.figures.in_pps, std::nullopt) << "no counter for it: '-', not 0";
}

TEST(TopView, ProxyRowsCountBytesConnectionsRefusalsAndErrors) {
  Snapshots s;
  TopView view = build_top_view(kServices, s.index, TopSort::name);
  const TopRow& web = find_row(view, "web");
  EXPECT_EQ(web.endpoint, "[::1]:80");
  EXPECT_EQ(web.figures.in_pps, std::nullopt) << "TCP has no packet counts";
  EXPECT_EQ(web.figures.in_bps, 8000);
  EXPECT_EQ(web.figures.out_bps, 1e6);
  EXPECT_EQ(web.figures.active, 2);
  EXPECT_EQ(web.figures.drops_per_second, 3);
  EXPECT_EQ(web.figures.drops_by_reason,
            (std::map<std::string, double>{{"global_limit", 0}, {"service_limit", 3}}));
  // failed 1 + resets 4 less the 2 idle timeouts + 0 accept errors
  EXPECT_EQ(web.figures.errors_per_second, 3);
  EXPECT_EQ(web.figures.errors_by_reason,
            (std::map<std::string, double>{{"accept", 0}, {"no_backend", 1}, {"reset", 2}}));
  EXPECT_EQ(web.backends_up, 1) << "unchecked backends take traffic";
  ASSERT_EQ(web.backends.size(), 1u);
  EXPECT_EQ(web.backends[0].state, "unchecked");
  EXPECT_EQ(web.backends[0].figures.out_bps, 1e6);
  EXPECT_EQ(web.backends[0].figures.active, 2);
  EXPECT_EQ(web.backends[0].figures.errors_per_second, 0);

  const TopRow& echo = find_row(view, "echo");
  EXPECT_EQ(echo.figures.in_bps, 2000);
  EXPECT_EQ(echo.figures.out_bps, 2000) << "an echo sends back what it receives";
  EXPECT_EQ(echo.figures.active, 0);
  EXPECT_EQ(echo.backends_total, std::nullopt);
}

TEST(TopView, FastPathDropsSumTheWorkersTheKernelsAndTheXdpPrograms) {
  Snapshots s;
  TopView view = build_top_view(kServices, s.index, TopSort::name);
  ASSERT_TRUE(view.traffic.fastpath);
  EXPECT_EQ(view.fastpath_drops.drops_per_second, 12);
  EXPECT_EQ(view.fastpath_drops.drops_by_reason,
            (std::map<std::string, double>{{"kernel_rx_ring_full", 4},
                                           {"no_backend", 7},
                                           {"tx_ring_full", 1},
                                           {"xdp_drop_prefix", 0}}));
}

TEST(TopView, SortsBusiestFirstOrByName) {
  Snapshots s;
  auto order = [&](TopSort sort) {
    std::vector<std::string> names;
    for (const TopRow& row : build_top_view(kServices, s.index, sort).rows) {
      names.push_back(row.service);
    }
    return names;
  };
  EXPECT_EQ(order(TopSort::traffic), (std::vector<std::string>{"dns", "web", "echo", "mirror"}));
  EXPECT_EQ(order(TopSort::name), (std::vector<std::string>{"dns", "echo", "mirror", "web"}));
}

TEST(TopView, AServiceOnBothProtocolsHasARowForEach) {
  json services = json::parse(R"({"services":[{"name":"both","vip":"10.0.0.1","port":53,
    "mode":"proxy","paths":{"udp":"fastpath","tcp":"proxy"},"backends":[]}]})");
  Snapshots s;
  TopView view = build_top_view(services, s.index, TopSort::name);
  ASSERT_EQ(view.rows.size(), 2u);
  EXPECT_EQ(view.rows[0].protocol, "tcp");
  EXPECT_EQ(view.rows[0].path, "proxy");
  EXPECT_EQ(view.rows[1].protocol, "udp");
  EXPECT_EQ(view.rows[1].path, "fastpath");
}

TEST(TopView, NothingToShowIsNoRowsNotACrash) {
  StatsIndex empty(json::object(), nullptr);
  EXPECT_TRUE(build_top_view(json::object(), empty, TopSort::traffic).rows.empty());
  EXPECT_TRUE(
      build_top_view(json::parse(R"({"services":[1,"x",{"name":"a"}]})"), empty, TopSort::traffic)
          .rows.empty());
  EXPECT_FALSE(build_top_view(json::object(), empty, TopSort::traffic).traffic.fastpath);
}

TEST(TopTable, OneRowPerServiceWithBackendsAndReasonsOnDemand) {
  Snapshots s;
  TopView view = build_top_view(kServices, s.index, TopSort::traffic);
  TopOptions options;
  EXPECT_EQ(render_top_table(view, options),
            "SERVICE  PROTO  VIP:PORT      PATH              BACKENDS  IN pkt/s  IN bit/s  "
            "OUT pkt/s  OUT bit/s  ACTIVE  DROPS/s  ERRORS/s\n"
            "dns      udp    10.0.0.10:53  fastpath          1/2 up         500      400k        "
            "450       720k       -        -         -\n"
            "web      tcp    [::1]:80      proxy             1/1 up           -     8.00k          "
            "-      1.00M       2        3         3\n"
            "echo     tcp    127.0.0.1:7   echo              -                -     2.00k          "
            "-      2.00k       0        -         0\n"
            "mirror   udp    10.0.0.11:9   fastpath reflect  -                -         -          "
            "-          -       -        -         -\n"
            "\n"
            "fast path drops: 12/s\n");
  options.backends = true;
  options.reasons = true;
  std::string text = render_top_table(view, options);
  EXPECT_NE(text.find("\n  10.0.1.3:53                                         down    "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  10.0.1.2:53                                         up,drain  "),
            std::string::npos)
      << "the operator's state after the health";
  EXPECT_NE(text.find("\n  drops: service_limit 3/s; errors: no_backend 1/s, reset 2/s\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fast path drops: 12/s (kernel_rx_ring_full 4/s, no_backend 7/s, "
                      "tx_ring_full 1/s)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('{'), std::string::npos);
}

// The fast path's per-backend figures: dns (nat) sent 300 requests to 10.0.1.2 and 200 to
// 10.0.1.3 in the second, 270 replies came back from the first and 180 from the second; web6
// (gue, UDP and TCP) sent 80 to one backend and 20 to the other, inside the tunnel.
struct BackendSnapshots {
  json services = json::parse(R"({"services":[
    {"name":"dns","vip":"10.0.0.10","port":53,"protocols":["udp"],"mode":"proxy",
     "forwarding":"nat","paths":{"udp":"fastpath"},
     "backends":[{"address":"10.0.1.2:53","state":"up","up":true},
                 {"address":"10.0.1.3:53","state":"up","up":true}]},
    {"name":"web6","vip":"fd00::10","port":443,"protocols":["udp","tcp"],"mode":"proxy",
     "forwarding":"gue","paths":{"udp":"fastpath","tcp":"fastpath"},
     "backends":[{"address":"[fd00:1::7]:443","state":"up","up":true},
                 {"address":"[fd00:1::8]:443","state":"up","up":true}]}]})");
  static json at(double t) {
    auto per_backend = [t](double in_dns2, double in_dns3, double in_web7, double in_web8,
                           double per) {
      return json::array(
          {sample({{"service", "dns"}, {"backend", "10.0.1.2:53"}, {"direction", "in"}},
                  in_dns2 * per * t),
           sample({{"service", "dns"}, {"backend", "10.0.1.2:53"}, {"direction", "out"}},
                  0.9 * in_dns2 * per * t),
           sample({{"service", "dns"}, {"backend", "10.0.1.3:53"}, {"direction", "in"}},
                  in_dns3 * per * t),
           sample({{"service", "dns"}, {"backend", "10.0.1.3:53"}, {"direction", "out"}},
                  0.9 * in_dns3 * per * t),
           sample({{"service", "web6"}, {"backend", "[fd00:1::7]:443"}, {"direction", "in"}},
                  in_web7 * per * t),
           sample({{"service", "web6"}, {"backend", "[fd00:1::8]:443"}, {"direction", "in"}},
                  in_web8 * per * t)});
    };
    return stats_of({
        family("ferry_xdp_service_packets_total", "counter",
               {sample({{"service", "dns"}, {"direction", "in"}}, 500 * t),
                sample({{"service", "dns"}, {"direction", "out"}}, 450 * t),
                sample({{"service", "web6"}, {"direction", "in"}}, 100 * t),
                sample({{"service", "web6"}, {"direction", "out"}}, 0)}),
        family("ferry_xdp_service_bytes_total", "counter",
               {sample({{"service", "dns"}, {"direction", "in"}}, 50000 * t),
                sample({{"service", "dns"}, {"direction", "out"}}, 90000 * t),
                sample({{"service", "web6"}, {"direction", "in"}}, 10000 * t),
                sample({{"service", "web6"}, {"direction", "out"}}, 0)}),
        family("ferry_xsk_backend_packets_total", "counter", per_backend(300, 200, 80, 20, 1)),
        family("ferry_xsk_backend_bytes_total", "counter", per_backend(300, 200, 80, 20, 100)),
        family("ferry_xsk_rx_packets_total", "counter", {sample({{"queue", "0"}}, 1000 * t)}),
    });
  }
  json before = at(1);
  json after = at(2);
  SeriesRates rates = compute_rates(before, after, 1.0);
  StatsIndex index{after, &rates};
};

TEST(TopView, UdpBackendRowsAreWhatTheWorkersSentEachBackendAndGotBack) {
  BackendSnapshots s;
  TopView view = build_top_view(s.services, s.index, TopSort::name);
  const TopRow& dns = find_row(view, "dns");
  EXPECT_EQ(dns.path, "fastpath");
  ASSERT_EQ(dns.backends.size(), 2u);
  const TopFigures& first = dns.backends[0].figures;
  EXPECT_EQ(first.in_pps, 300);
  EXPECT_EQ(first.in_bps, 300 * 100 * 8);
  EXPECT_EQ(first.out_pps, 270);
  EXPECT_EQ(first.out_bps, 270 * 100 * 8);
  EXPECT_EQ(first.active, std::nullopt);
  EXPECT_EQ(dns.backends[1].figures.in_pps, 200);
  EXPECT_EQ(dns.backends[1].figures.out_pps, 180);
}

TEST(TopView, AnEncapsulatingServiceIsOneRowWithItsForwardingAndNoReplies) {
  BackendSnapshots s;
  TopView view = build_top_view(s.services, s.index, TopSort::name);
  ASSERT_EQ(view.rows.size(), 2u) << "UDP and TCP of web6 are counted together: one row";
  const TopRow& web6 = find_row(view, "web6");
  EXPECT_EQ(web6.protocol, "udp,tcp");
  EXPECT_EQ(web6.path, "fastpath gue");
  EXPECT_EQ(web6.endpoint, "[fd00::10]:443");
  EXPECT_EQ(web6.figures.in_pps, 100);
  EXPECT_EQ(web6.figures.in_bps, 80000);
  EXPECT_EQ(web6.figures.out_pps, std::nullopt) << "replies bypass the gateway";
  ASSERT_EQ(web6.backends.size(), 2u);
  EXPECT_EQ(web6.backends[0].figures.in_pps, 80);
  EXPECT_EQ(web6.backends[1].figures.in_bps, 20 * 100 * 8);
  EXPECT_EQ(web6.backends[1].figures.out_pps, std::nullopt);
  EXPECT_EQ(web6.backends[1].figures.out_bps, std::nullopt);

  json tcp_only = s.services;
  tcp_only["services"][1]["protocols"] = {"tcp"};
  tcp_only["services"][1]["paths"] = {{"tcp", "fastpath"}};
  tcp_only["services"][1]["forwarding"] = "ipip";
  const TopView tcp_view = build_top_view(tcp_only, s.index, TopSort::name);
  const TopRow& web = find_row(tcp_view, "web6");
  EXPECT_EQ(web.protocol, "tcp");
  EXPECT_EQ(web.path, "fastpath ipip");
  EXPECT_EQ(web.figures.in_pps, 100) << "the XDP program's count, not an echo's";
  EXPECT_EQ(web.figures.active, std::nullopt);
}

TEST(TopTable, FastPathBackendRowsShowTheirTrafficAndTheForwarding) {
  BackendSnapshots s;
  TopOptions options;
  options.backends = true;
  EXPECT_EQ(render_top_table(build_top_view(s.services, s.index, TopSort::name), options),
            "SERVICE            PROTO    VIP:PORT        PATH          BACKENDS  IN pkt/s  "
            "IN bit/s  OUT pkt/s  OUT bit/s  ACTIVE  DROPS/s  ERRORS/s\n"
            "dns                udp      10.0.0.10:53    fastpath      2/2 up         500      "
            "400k        450       720k       -        -         -\n"
            "  10.0.1.2:53                                             up             300      "
            "240k        270       216k       -        -         -\n"
            "  10.0.1.3:53                                             up             200      "
            "160k        180       144k       -        -         -\n"
            "web6               udp,tcp  [fd00::10]:443  fastpath gue  2/2 up         100     "
            "80.0k          -          -       -        -         -\n"
            "  [fd00:1::7]:443                                         up              80     "
            "64.0k          -          -       -        -         -\n"
            "  [fd00:1::8]:443                                         up              20     "
            "16.0k          -          -       -        -         -\n"
            "\n"
            "fast path drops: -/s\n");
}

TEST(TopJson, HasTheTablesFiguresWithNullForUnknown) {
  Snapshots s;
  TopView view = build_top_view(kServices, s.index, TopSort::name);
  json status = {{"pid", 42}, {"uptime_seconds", 9}};
  json doc = top_json(view, status, 1.0);
  EXPECT_EQ(doc["pid"], 42);
  EXPECT_EQ(doc["interval_seconds"], 1.0);
  ASSERT_EQ(doc["services"].size(), 4u);
  const json& dns = doc["services"][0];
  EXPECT_EQ(dns["service"], "dns");
  EXPECT_EQ(dns["in_packets_per_second"], 500.0);
  EXPECT_EQ(dns["active"], nullptr);
  EXPECT_EQ(dns["backends"][1]["state"], "down");
  EXPECT_EQ(dns["backends"][0]["admin"], "drain");
  EXPECT_EQ(dns["backends"][0]["weight"], 2.0);
  EXPECT_EQ(dns["backends"][1]["admin"], nullptr);
  const json& web = doc["services"][3];
  EXPECT_EQ(web["errors_by_reason"]["reset"], 2.0);
  EXPECT_EQ(doc["traffic"]["fastpath"]["rx_packets_per_second"], 1950.0);
  EXPECT_EQ(doc["traffic"]["fastpath"]["drops_per_second"], 12.0);
  EXPECT_EQ(doc["traffic"]["proxy"]["out_bits_per_second"], 1e6);
}

// A daemon whose dns requests counter grows by 100 per stats request.
class CountingDaemon {
 public:
  CountingDaemon()
      : daemon_([this](const json& request) {
          if (request["cmd"] == "status") return ok_response({{"pid", 7}, {"uptime_seconds", 1}});
          if (request["cmd"] == "services") return ok_response(kServices);
          json stats = previous_stats();
          stats["metrics"][0]["samples"][0]["value"] = 100.0 * ++stats_calls_;
          return ok_response(stats);
        }) {}
  FakeDaemon& daemon() { return daemon_; }

 private:
  std::atomic<int> stats_calls_{0};
  FakeDaemon daemon_;
};

TEST(RunTop, OffATerminalEachFrameHasRatesAndCountFramesAreShown) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  TopOptions options;
  options.interval_ms = 1;
  options.count = 2;
  std::ostringstream out;
  run_top(client, options, out);
  std::string text = out.str();
  EXPECT_EQ(occurrences(text, "ferryd pid 7"), 2u) << text;
  EXPECT_EQ(occurrences(text, "\nSERVICE"), 2u);
  EXPECT_EQ(text.find("\x1b["), std::string::npos);
  // Three snapshots on one connection: a baseline, then one per frame.
  auto requests = counting.daemon().requests();
  ASSERT_EQ(requests.size(), 9u);
  EXPECT_EQ(requests[0]["cmd"], "status");
  EXPECT_EQ(requests[1]["cmd"], "services");
  EXPECT_EQ(requests[2]["cmd"], "stats");
  EXPECT_EQ(counting.daemon().connections(), 1);
}

TEST(RunTop, OnATerminalTheFirstFrameComesAtOnceAndRedrawsInPlace) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  TopOptions options;
  options.interval_ms = 1;
  options.count = 1;
  options.clear_screen = true;
  std::ostringstream out;
  run_top(client, options, out);
  EXPECT_EQ(out.str().rfind("\x1b[H\x1b[2J", 0), 0u);
  EXPECT_EQ(occurrences(out.str(), "\x1b[H\x1b[2J"), 2u) << "the frame without rates, then one";
}

TEST(RunTop, JsonPrintsOneObjectPerFrame) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  TopOptions options;
  options.interval_ms = 1;
  options.count = 2;
  options.json = true;
  options.clear_screen = true;  // ignored with --json
  std::ostringstream out;
  run_top(client, options, out);
  std::istringstream lines(out.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    json doc = json::parse(line);
    EXPECT_EQ(doc["services"][0]["service"], "dns");
    EXPECT_GT(doc["services"][0]["in_packets_per_second"].get<double>(), 0);
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(RunTop, StopsWhenAsked) {
  CountingDaemon counting;
  Client client = Client::connect(counting.daemon().socket_path(), 1000);
  std::ostringstream out;
  TopOptions options;
  options.interval_ms = 1;
  options.stop_requested = [&] { return !out.str().empty(); };
  run_top(client, options, out);
  EXPECT_EQ(occurrences(out.str(), "ferryd pid 7"), 1u);
}

}  // namespace
}  // namespace ferry::ctl
