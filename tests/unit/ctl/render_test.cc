// Each command's result rendered to the exact text an operator sees.
#include "lib/ctl/render.hh"

#include <gtest/gtest.h>

namespace ferry::ctl {
namespace {

using nlohmann::json;

TEST(RenderStatus, PrintsKeyValueLinesAndTheInterfacesTable) {
  json status = json::parse(R"({"version":"0.1.0","pid":1234,"state":"running",
    "uptime_seconds":93784.5,"config_path":"/etc/ferry/ferryd.json",
    "config_loaded_at":"2026-11-29T20:00:00Z","reloads":3,"reload_failures":1,
    "last_reload_error":null,"control":{"socket":"/run/ferry/ferryd.sock","connections":1},
    "metrics":{"listen":"127.0.0.1:9469"},
    "xdp":{"program_loaded":true,"metadata":true,"interfaces":[
      {"name":"eth0","ifindex":2,"mode":"native","attached":true},
      {"name":"eth1","ifindex":13,"mode":"generic","attached":false}]},
    "services":2,"routes":1,"workers":{"total":3,"alive":2}})");
  EXPECT_EQ(render_status(status),
            "version: 0.1.0\n"
            "pid: 1234\n"
            "state: running\n"
            "uptime: 1d 2h 3m 4s\n"
            "config: /etc/ferry/ferryd.json\n"
            "config loaded at: 2026-11-29T20:00:00Z\n"
            "reloads: 3 (1 failed)\n"
            "control socket: /run/ferry/ferryd.sock\n"
            "control connections: 1\n"
            "metrics: 127.0.0.1:9469\n"
            "xdp program: loaded\n"
            "xdp metadata: on\n"
            "services: 2\n"
            "routes: 1\n"
            "workers: 2 of 3 alive\n"
            "\n"
            "INTERFACE  IFINDEX  MODE     ATTACHED\n"
            "eth0             2  native   yes\n"
            "eth1            13  generic  no\n");
}

TEST(RenderStatus, SkipsMissingKeysAndFlattensUnknownOnes) {
  json status = json::parse(R"({"pid":7,"state":"reloading","metrics":null,
    "last_reload_error":"/etc/ferry/ferryd.json:3:5: unknown key \"prot\"",
    "control":{"socket":"/s","tcp":{"listen":"0.0.0.0:9470"}},
    "xdp":{"program_loaded":false,"metadata":false,"interfaces":[]},
    "future":{"a":{"b":1.5},"c":[1,2]},"uptime_seconds":"soon","zzz":true})");
  EXPECT_EQ(render_status(status),
            "pid: 7\n"
            "state: reloading\n"
            "uptime_seconds: soon\n"
            "last reload error: /etc/ferry/ferryd.json:3:5: unknown key \"prot\"\n"
            "control socket: /s\n"
            "control.tcp.listen: 0.0.0.0:9470\n"
            "metrics: off\n"
            "xdp program: not loaded\n"
            "xdp metadata: off (the workers match every frame)\n"
            "xdp interfaces: none\n"
            "future.a.b: 1.5\n"
            "future.c: 1,2\n"
            "zzz: true\n");
}

TEST(RenderStatus, ShowsExtraInterfaceKeysAsColumns) {
  json status = json::parse(R"({"xdp":{"interfaces":[
    {"name":"eth0","ifindex":2,"mode":"native","attached":true,"queues":4},
    {"name":"eth1","ifindex":3,"mode":"generic","attached":true,"zerocopy":false}]}})");
  EXPECT_EQ(render_status(status),
            "\n"
            "INTERFACE  IFINDEX  MODE     ATTACHED  QUEUES  ZEROCOPY\n"
            "eth0             2  native   yes            4  -\n"
            "eth1             3  generic  yes            -  false\n");
}

TEST(RenderStatus, ListsOfObjectsBecomeTablesWithoutJson) {
  json status = json::parse(R"({"pid":7,
    "health":{"checked":2,"down":1,"backends":[
      {"service":"dns","address":"10.0.1.2:53","state":"up","up":true,"checked":true,
       "checks":{"ok":8,"timeout":0},"consecutive_failures":0,"consecutive_successes":8,
       "last_check_age_ms":845,"last_error":null},
      {"service":"dns","address":"10.0.1.3:53","state":"down","up":false,"checked":true,
       "checks":{"ok":0,"timeout":3},"consecutive_failures":3,"consecutive_successes":0,
       "last_check_age_ms":1500,"last_error":"timeout"}]},
    "tcp":{"listeners":[{"address":"127.0.0.1:7007","service":"echo"}]},
    "future":{"rows":[{"a":1,"b":{"c":[{"d":1}]}}]}})");
  EXPECT_EQ(render_status(status),
            "pid: 7\n"
            "health.checked: 2\n"
            "health.down: 1\n"
            "\n"
            "future.rows:\n"
            "A  B\n"
            "1  c=1 entries\n"
            "\n"
            "health.backends:\n"
            "SERVICE  BACKEND      STATE  LAST CHECK  CHECKS          LAST ERROR\n"
            "dns      10.0.1.2:53  up      845ms ago  ok=8,timeout=0  -\n"
            "dns      10.0.1.3:53  down     1.5s ago  ok=0,timeout=3  timeout\n"
            "\n"
            "tcp.listeners:\n"
            "SERVICE  LISTEN\n"
            "echo     127.0.0.1:7007\n");
}

TEST(RenderBackend, SaysTheStateTheWeightAndWhetherItTakesNewTraffic) {
  EXPECT_EQ(render_backend(json::parse(R"({"service":"web","backend":"10.0.1.2:80",
    "admin":"drain","weight":2,"configured_weight":1,"health":"up","takes_new_traffic":false})")),
            "web 10.0.1.2:80: drain, weight 2 (configured 1), health up, takes no new traffic\n");
  EXPECT_EQ(render_backend(json::parse(R"({"service":"web","backend":"10.0.1.2:80",
    "admin":"enabled","weight":1,"configured_weight":1,"health":"up","takes_new_traffic":true})")),
            "web 10.0.1.2:80: enabled, weight 1, health up, takes new traffic\n");
}

const json kStats = json::parse(R"({"metrics":[
  {"name":"ferry_control_requests_total","type":"counter","help":"requests",
   "samples":[{"labels":{"cmd":"status","result":"ok"},"value":3},
              {"labels":{"cmd":"stats","result":"error"},"value":1200}]},
  {"name":"ferry_uptime_seconds","type":"gauge","help":"uptime",
   "samples":[{"labels":{},"value":12.5}]},
  {"name":"ferry_control_request_seconds","type":"histogram","help":"latency",
   "samples":[{"labels":{"cmd":"status"},"buckets":[[0.001,2],[0.01,4]],"sum":0.02,"count":4},
              {"labels":{"cmd":"help"},"buckets":[[0.001,0],[0.01,0]],"sum":0,"count":0}]},
  {"name":"ferry_declared_total","type":"counter","help":"nothing yet","samples":[]}]})");

TEST(RenderStats, PrintsOneRowPerSampleWithHistogramsAsCountSumAvg) {
  EXPECT_EQ(render_stats(kStats),
            "METRIC                         LABELS                         VALUE\n"
            "ferry_control_requests_total   cmd=status,result=ok               3\n"
            "ferry_control_requests_total   cmd=stats,result=error          1200\n"
            "ferry_uptime_seconds                                           12.5\n"
            "ferry_control_request_seconds  cmd=status              4/0.02/0.005\n"
            "ferry_control_request_seconds  cmd=help                       0/0/-\n");
}

TEST(RenderStats, AddsARateColumnOnlyWhenRatesAreGiven) {
  SeriesRates rates = {
      {series_key("ferry_control_requests_total", json{{"cmd", "stats"}, {"result", "error"}}),
       2.5}};
  json stats = json::parse(R"({"metrics":[
    {"name":"ferry_control_requests_total","type":"counter","samples":[
      {"labels":{"cmd":"status","result":"ok"},"value":3},
      {"labels":{"cmd":"stats","result":"error"},"value":1200}]},
    {"name":"ferry_uptime_seconds","type":"gauge","samples":[{"labels":{},"value":12}]}]})");
  EXPECT_EQ(render_stats(stats, &rates),
            "METRIC                        LABELS                  VALUE  RATE/s\n"
            "ferry_control_requests_total  cmd=status,result=ok        3       -\n"
            "ferry_control_requests_total  cmd=stats,result=error   1200     2.5\n"
            "ferry_uptime_seconds                                     12\n");
}

TEST(RenderStats, SaysSoWhenThereAreNoSamples) {
  EXPECT_EQ(render_stats(json::parse(R"({"metrics":[]})")), "no metrics\n");
}

TEST(RenderStats, AcceptsLabelsAsAnArrayOfPairs) {
  EXPECT_EQ(format_labels(json::parse(R"([["iface","eth0"],["queue","3"]])")),
            "iface=eth0,queue=3");
  EXPECT_EQ(format_labels(json::parse(R"({"queue":3,"iface":"eth0"})")), "iface=eth0,queue=3");
  EXPECT_EQ(series_key("ferry_rx_packets_total", json::object()), "ferry_rx_packets_total{}");
}

TEST(RenderServices, PrintsOneRowPerServiceWithItsPathsAndBackendStates) {
  json services = json::parse(R"({"services":[
    {"name":"dns","vip":"10.0.0.10","port":53,"protocols":["udp","tcp"],"mode":"proxy",
     "paths":{"tcp":"proxy","udp":"fastpath"},
     "balance":"maglev","backends":[{"address":"10.0.1.2:53","state":"up"},
                                    {"address":"10.0.1.3:53","state":"down"}]},
    {"name":"echo","vip":"::1","port":7007,"protocols":["tcp"],"mode":"echo",
     "paths":{"tcp":"echo"},"balance":null,"backends":[]},
    {"name":"ping","vip":"10.0.0.9","port":9,"protocols":["udp"],"mode":"reflect",
     "paths":{"udp":"fastpath"},"balance":null,"backends":[]}]})");
  EXPECT_EQ(render_services(services),
            "NAME  VIP:PORT      PATH                     BALANCE  CHECK  BACKENDS\n"
            "dns   10.0.0.10:53  udp fastpath, tcp proxy  maglev   -      "
            "10.0.1.2:53(up),10.0.1.3:53(down)\n"
            "echo  [::1]:7007    tcp echo                 -        -      -\n"
            "ping  10.0.0.9:9    udp fastpath reflect     -        -      -\n");
}

TEST(RenderServices, ShowsTheCheckTypeAndTheReasonOfAFailingLastCheck) {
  json services = json::parse(R"({"services":[
    {"name":"dns","vip":"10.0.0.10","port":53,"protocols":["udp"],"mode":"proxy",
     "paths":{"udp":"fastpath"},"balance":"maglev","check":"dns",
     "backends":[{"address":"10.0.1.2:53","state":"up","last_result":"ok",
                  "last_reason":"rcode NOERROR"},
                 {"address":"10.0.1.3:53","state":"down","last_result":"error",
                  "last_reason":"rcode SERVFAIL"}]}]})");
  EXPECT_EQ(render_services(services),
            "NAME  VIP:PORT      PATH          BALANCE  CHECK  BACKENDS\n"
            "dns   10.0.0.10:53  udp fastpath  maglev   dns    "
            "10.0.1.2:53(up),10.0.1.3:53(down,rcode SERVFAIL)\n");
}

TEST(RenderServices, MarksQuicLbAndEachBackendsServerId) {
  json services = json::parse(R"({"services":[
    {"name":"h3","vip":"10.0.0.13","port":443,"protocols":["udp"],"mode":"proxy",
     "paths":{"udp":"fastpath"},"balance":"maglev",
     "quic_lb":[{"id":0,"server_id_bytes":2,"nonce_bytes":6,"algorithm":"four_pass"}],
     "backends":[{"address":"10.0.1.9:443","state":"up","server_id":"0001"},
                 {"address":"10.0.1.10:443","state":"up"}]}]})");
  EXPECT_EQ(render_services(services),
            "NAME  VIP:PORT       PATH          BALANCE          CHECK  BACKENDS\n"
            "h3    10.0.0.13:443  udp fastpath  maglev, quic-lb  -      "
            "10.0.1.9:443(up,sid 0001),10.0.1.10:443(up)\n");
}

TEST(RenderServices, SaysSoWhenNoneAreConfigured) {
  EXPECT_EQ(render_services(json::parse(R"({"services":[]})")), "no services configured\n");
}

TEST(RenderWorkers, AddsOneColumnPerNumericCounterAnyRowHas) {
  json workers = json::parse(R"({"workers":[
    {"name":"control","kind":"control","alive":true,"heartbeat_age_ms":12},
    {"name":"xsk-eth0-q0","kind":"xsk","alive":true,"heartbeat_age_ms":1500,
     "rx_packets":1234567,"tx_packets":1200000,"queue":"eth0/0"},
    {"name":"uring-1","kind":"uring","alive":false,"heartbeat_age_ms":75000,"connections":3}]})");
  EXPECT_EQ(render_workers(workers),
            "NAME         KIND     ALIVE  HEARTBEAT  RX_PACKETS  TX_PACKETS  CONNECTIONS\n"
            "control      control  yes         12ms           -           -            -\n"
            "xsk-eth0-q0  xsk      yes         1.5s     1234567     1200000            -\n"
            "uring-1      uring    no        1m 15s           -           -            3\n");
}

TEST(RenderConfig, PrintsThePathThenThePrettyJson) {
  json config = json::parse(R"({"path":"/etc/ferry/ferryd.json",
    "config":{"metrics":{"listen":"127.0.0.1:9469"}}})");
  EXPECT_EQ(render_config(config),
            "# /etc/ferry/ferryd.json\n"
            "{\n"
            "  \"metrics\": {\n"
            "    \"listen\": \"127.0.0.1:9469\"\n"
            "  }\n"
            "}\n");
}

TEST(RenderReload, NamesTheReloadedFile) {
  EXPECT_EQ(
      render_reload(json::parse(R"({"reloaded":true,"config_path":"/etc/ferry/ferryd.json"})")),
      "reloaded /etc/ferry/ferryd.json\n");
  EXPECT_EQ(render_reload(json::parse(R"({"reloaded":false,"config_path":"/c.json",
                                          "reason":"unchanged"})")),
            "not reloaded /c.json: unchanged\n");
}

TEST(RenderHelp, AcceptsAListOrAMapOfCommands) {
  EXPECT_EQ(render_help(json::parse(R"({"commands":[
              {"name":"help","access":"read","summary":"list the commands"},
              {"name":"reload","access":"admin","summary":"re-read the config file"}]})")),
            "COMMAND  ACCESS  SUMMARY\n"
            "help     read    list the commands\n"
            "reload   admin   re-read the config file\n");
  EXPECT_EQ(render_help(json::parse(R"({"commands":{"status":"daemon state","stats":"metrics"}})")),
            "COMMAND  SUMMARY\n"
            "stats    metrics\n"
            "status   daemon state\n");
}

}  // namespace
}  // namespace ferry::ctl
