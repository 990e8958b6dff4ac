// libFuzzer target for the whole /metrics endpoint (lib/metrics/http_server): the input is what
// one client sends over a real loopback TCP connection to a started MetricsHttpServer before it
// half-closes, with the real registry behind it (process metrics, the server's own counters, and
// families whose label values need escaping). Every complete request is answered in order with
// the status parse_request and the path call for (200 for / and /metrics, 404 elsewhere, the
// parser's error otherwise), each a well-formed HTTP/1.1 response whose /metrics body is valid
// Prometheus text; only the last may say "Connection: close", and the server always closes.
#include <signal.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "lib/common/log.hh"
#include "lib/metrics/http_request.hh"
#include "lib/metrics/http_server.hh"
#include "lib/metrics/process_metrics.hh"
#include "lib/metrics/prometheus.hh"
#include "tests/fuzz/fuzz_check.hh"
#include "tests/fuzz/stream_exchange.hh"

namespace {

namespace asio = boost::asio;
using namespace ferry;
using asio::ip::tcp;

// Families that exercise the encoder: escapes in label values and help, every value shape.
void collect_fixture(metrics::SnapshotBuilder& out) {
  out.counter("ferry_fuzz_requests_total", "Requests, by \"kind\"\\path\nsecond line.",
              {{"service", "we\"b\\\n"}, {"backend", "[2001:db8::2]:53"}}, 12345678901.0);
  out.gauge("ferry_fuzz_level", "A gauge.", {{"worker", "tcp-0"}}, -0.25);
  out.gauge("ferry_fuzz_level", "A gauge.", {{"worker", "nan"}}, std::nan(""));
  out.gauge("ferry_fuzz_level", "A gauge.", {{"worker", "inf"}}, INFINITY);
  out.gauge("ferry_fuzz_level", "A gauge.", {{"worker", "utf8 \xc3\xa9"}}, 1e300);
  metrics::HistogramValue h;
  h.buckets = {{0.001, 1}, {0.5, 3}};  // +Inf is the count
  h.sum = 1.25;
  h.count = 4;
  out.histogram("ferry_fuzz_seconds", "A histogram.", {{"service", "dns"}}, h);
  out.declare("ferry_fuzz_empty_total", "Declared, never sampled.", metrics::Type::counter);
}

struct World {
  World() {
    ::signal(SIGPIPE, SIG_IGN);
    log::set_threshold(log::Level::error);
    process = metrics::register_process_metrics(registry, "fuzz", 1.0);
    fixture = registry.add(collect_fixture);
    server = std::make_unique<metrics::MetricsHttpServer>(io, *net::Endpoint::parse("127.0.0.1:0"),
                                                          registry);
    server->start();
    net::Endpoint bound = server->local_endpoint();
    endpoint = tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), bound.port);
  }

  asio::io_context io;
  metrics::Registry registry;
  metrics::Registry::Handle process;
  metrics::Registry::Handle fixture;
  std::unique_ptr<metrics::MetricsHttpServer> server;
  tcp::endpoint endpoint;
};

World& world() {
  static World w;
  return w;
}

// Connects, sends `bytes`, half-closes, and returns all the server wrote until it closed. The
// client resets its end on close (SO_LINGER 0), so no TIME_WAIT piles up over millions of runs.
std::string converse(World& w, std::string_view bytes) {
  tcp::socket client(w.io);
  // Not a blocking connect(): libFuzzer's -timeout alarm interrupts it (EINTR).
  bool connected = false;
  client.async_connect(w.endpoint, [&](boost::system::error_code error) {
    FUZZ_CHECK(!error);
    connected = true;
  });
  while (!connected) w.io.run_one();
  client.set_option(asio::socket_base::linger(true, 0));
  return fuzz::exchange(w.io, client, bytes);
}

struct Expected {
  int status = 0;
  bool head = false;
  bool metrics = false;  // a /metrics body
  bool close = false;    // the server closes after it
};

// What the server must answer for `input`: parse_request over what is left, one request at a
// time, as the session does.
std::vector<Expected> expected_answers(std::string_view input) {
  std::vector<Expected> out;
  for (;;) {
    metrics::http::ParseResult result = metrics::http::parse_request(input);
    if (std::holds_alternative<metrics::http::NeedMore>(result)) return out;
    if (const auto* error = std::get_if<metrics::http::ParseError>(&result)) {
      out.push_back({error->status, false, false, true});
      return out;
    }
    const auto& request = std::get<metrics::http::Request>(result);
    std::string_view path = request.path();
    out.push_back({path == "/" || path == "/metrics" ? 200 : 404, request.method == "HEAD",
                   path == "/metrics", !request.keep_alive});
    if (!request.keep_alive) return out;
    input.remove_prefix(request.request_bytes);
  }
}

bool is_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  }
  return !std::isdigit(static_cast<unsigned char>(s[0]));
}

bool is_value(std::string_view s) {
  if (s == "+Inf" || s == "-Inf" || s == "NaN") return true;
  std::string text(s);
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

// One line of the text format 0.0.4: HELP, TYPE, or a sample name{label="value",...} value.
void check_exposition_line(std::string_view line) {
  if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
    std::string_view rest = line.substr(7);
    std::size_t space = rest.find(' ');
    FUZZ_CHECK(space != std::string_view::npos && is_name(rest.substr(0, space)));
    FUZZ_CHECK(rest.starts_with("ferry_"));
    if (line[2] == 'T') {
      std::string_view type = rest.substr(space + 1);
      FUZZ_CHECK(type == "counter" || type == "gauge" || type == "histogram");
    }
    return;
  }
  std::size_t name_end = line.find_first_of("{ ");
  FUZZ_CHECK(name_end != std::string_view::npos && is_name(line.substr(0, name_end)));
  FUZZ_CHECK(line.starts_with("ferry_"));
  std::size_t pos = name_end;
  if (line[pos] == '{') {
    ++pos;
    while (pos < line.size() && line[pos] != '}') {
      std::size_t eq = line.find("=\"", pos);
      FUZZ_CHECK(eq != std::string_view::npos && is_name(line.substr(pos, eq - pos)));
      pos = eq + 2;
      while (pos < line.size() && line[pos] != '"') {
        if (line[pos] == '\\') {
          FUZZ_CHECK(pos + 1 < line.size());
          char escaped = line[pos + 1];
          FUZZ_CHECK(escaped == '\\' || escaped == '"' || escaped == 'n');
          ++pos;
        }
        ++pos;
      }
      FUZZ_CHECK(pos < line.size());
      ++pos;  // the closing quote
      if (pos < line.size() && line[pos] == ',') ++pos;
    }
    FUZZ_CHECK(pos < line.size());
    ++pos;  // '}'
  }
  FUZZ_CHECK(pos < line.size() && line[pos] == ' ');
  FUZZ_CHECK(is_value(line.substr(pos + 1)));
}

void check_exposition(std::string_view body) {
  FUZZ_CHECK(!body.empty() && body.back() == '\n');
  while (!body.empty()) {
    std::size_t newline = body.find('\n');
    check_exposition_line(body.substr(0, newline));
    body.remove_prefix(newline + 1);
  }
}

struct Answer {
  int status = 0;
  std::string content_type;
  bool close = false;
  std::string_view body;
};

// Takes one response off the front of `received`: status line, headers, Content-Length bytes of
// body (none for a HEAD, whose Content-Length is that of the GET's body).
Answer take_answer(std::string_view& received, bool head) {
  std::size_t head_end = received.find("\r\n\r\n");
  FUZZ_CHECK(head_end != std::string_view::npos);
  std::string_view lines = received.substr(0, head_end + 2);
  received.remove_prefix(head_end + 4);
  FUZZ_CHECK(lines.starts_with("HTTP/1.1 ") && lines.size() > 13 && lines[12] == ' ');
  Answer a;
  a.status = std::atoi(std::string(lines.substr(9, 3)).c_str());
  lines.remove_prefix(lines.find("\r\n") + 2);
  long length = -1;
  while (!lines.empty()) {
    std::size_t end = lines.find("\r\n");
    std::string_view header = lines.substr(0, end);
    lines.remove_prefix(end + 2);
    std::size_t colon = header.find(": ");
    FUZZ_CHECK(colon != std::string_view::npos);
    std::string_view name = header.substr(0, colon);
    std::string_view value = header.substr(colon + 2);
    if (name == "Content-Length") length = std::atol(std::string(value).c_str());
    if (name == "Content-Type") a.content_type = value;
    if (name == "Connection") {
      FUZZ_CHECK(value == "close");
      a.close = true;
    }
  }
  FUZZ_CHECK(length >= 0 && !a.content_type.empty());
  if (!head) {
    FUZZ_CHECK(received.size() >= static_cast<std::size_t>(length));
    a.body = received.substr(0, static_cast<std::size_t>(length));
    received.remove_prefix(static_cast<std::size_t>(length));
  }
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string received = converse(w, input);
  const std::vector<Expected> expected = expected_answers(input);

  std::string_view rest = received;
  std::size_t answered = 0;
  while (!rest.empty()) {
    FUZZ_CHECK(answered < expected.size());
    const Expected& e = expected[answered];
    Answer a = take_answer(rest, e.head);
    FUZZ_CHECK(a.status == e.status);
    FUZZ_CHECK(a.close == e.close);
    if (e.metrics) {
      FUZZ_CHECK(a.content_type == metrics::kPrometheusContentType);
      if (!e.head) check_exposition(a.body);
    }
    ++answered;
  }
  // Every request answered; only a final error may go unsaid, when the bytes that make it one
  // came in a read the session did not parse before the client's end of input.
  FUZZ_CHECK(answered == expected.size() ||
             (answered + 1 == expected.size() && expected.back().status >= 400 &&
              expected.back().status != 404));
  return 0;
}
