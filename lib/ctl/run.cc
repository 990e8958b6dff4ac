// Runs one parsed ferryctl invocation: connect, ask, print, and turn the outcome into the
// documented exit code. main() only parses argv and wires up stdout, stderr and Ctrl-C.
#include "lib/ctl/run.hh"

#include <exception>

#include "lib/ctl/client.hh"
#include "lib/ctl/error.hh"
#include "lib/ctl/prefixes.hh"
#include "lib/ctl/render.hh"
#include "lib/ctl/top.hh"
#include "lib/ctl/upgrade.hh"
#include "lib/ctl/watch.hh"

namespace ferry::ctl {
namespace {

using json = nlohmann::json;

std::string render_result(Command command, const json& result) {
  switch (command) {
    case Command::status:
      return render_status(result);
    case Command::stats:
      return render_stats(result);
    case Command::services:
      return render_services(result);
    case Command::workers:
      return render_workers(result);
    case Command::config:
      return render_config(result);
    case Command::reload:
      return render_reload(result);
    case Command::backend:
      return render_backend(result);
    case Command::announce:
      return render_announce(result);
    case Command::help:
      return render_help(result);
    default:
      return result.dump(2) + "\n";
  }
}

int report_daemon_error(Command command, const Response& response, std::ostream& err) {
  err << "ferryctl: " << response.error_code << ": " << response.error_message << "\n";
  if (command == Command::reload && response.error_code == "rejected") {
    err << "ferryctl: ferryd keeps running with its previous configuration\n";
  }
  return static_cast<int>(daemon_error_exit_code(response.error_code));
}

int run_or_throw(const Invocation& inv, Terminal& term) {
  switch (inv.command) {
    case Command::usage:
      term.out << usage_text();
      return 0;
    case Command::version:
      term.out << "ferryctl " << FERRY_VERSION << "\n";
      return 0;
    default:
      break;
  }

  Client client = Client::connect(inv.socket_path, inv.timeout_ms);
  if (inv.command == Command::watch) {
    WatchOptions options;
    options.prefix = inv.prefix;
    options.prefixes = inv.prefixes;
    options.interval_ms = inv.interval_ms;
    options.count = inv.count;
    options.clear_screen = term.out_is_tty && !inv.json;
    options.json = inv.json;
    options.stop_requested = term.stop_requested;
    run_watch(client, options, term.out);
    return 0;
  }

  if (inv.command == Command::upgrade) return run_upgrade(client, inv, term);

  if (inv.command == Command::top) {
    TopOptions options;
    options.interval_ms = inv.interval_ms;
    options.count = inv.count;
    options.backends = inv.backends;
    options.reasons = inv.reasons;
    options.sort = inv.sort_by_name ? TopSort::name : TopSort::traffic;
    options.clear_screen = term.out_is_tty && !inv.json;
    options.json = inv.json;
    options.stop_requested = term.stop_requested;
    run_top(client, options, term.out);
    return 0;
  }

  json args = inv.command == Command::backend ? inv.args : json::object();
  if (!inv.prefix.empty()) args["prefix"] = inv.prefix;
  Response response = client.call(wire_command(inv.command), args);
  if (inv.json) {
    term.out << response.raw.dump(2) << "\n";
    return response.ok ? 0 : static_cast<int>(daemon_error_exit_code(response.error_code));
  }
  if (!response.ok) return report_daemon_error(inv.command, response, term.err);
  if (inv.command == Command::stats) response.result = keep_prefixes(response.result, inv.prefixes);
  term.out << render_result(inv.command, response.result);
  return 0;
}

}  // namespace

int run(const Invocation& invocation, Terminal& terminal) {
  try {
    int code = run_or_throw(invocation, terminal);
    terminal.out.flush();
    return code;
  } catch (const CtlError& e) {
    terminal.out.flush();
    terminal.err << "ferryctl: " << e.what() << "\n";
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    // A result we could not render is as unusable as a malformed one.
    terminal.out.flush();
    terminal.err << "ferryctl: cannot show ferryd's answer: " << e.what() << "\n";
    return static_cast<int>(ExitCode::timeout);
  }
}

}  // namespace ferry::ctl
