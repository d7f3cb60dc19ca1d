// The opening and the last line every regent process's main() shares, written once: the command
// line (ConfigCommandLine with --print-config and --log-format), the configuration, the logger,
// and the "<process> exiting" line that ends every run that is not --help or --print-config.
// Used on the main thread before any event loop exists; docs/operations.md lists each process's
// options and exit codes.
#pragma once

#include <kj/memory.h>

#include <CLI/CLI.hpp>
#include <string>
#include <variant>

#include "common/descriptor_limit.h"
#include "common/event_sink.h"
#include "common/json_lines_event_sink.h"
#include "common/log_event_sink.h"
#include "conf/command_line.h"
#include "conf/config.h"

namespace regent {

class ProcessMain final {
 public:
  struct Spec {
    std::string program;  // "regent-worker": the app's name, starts every option error.
    std::string idField;  // "resource_id": the exiting line's id field ("?" while unknown).
    // The exiting line is an event (with mono_us and wall_ms) that goes through events().
    bool clockFields = false;
    int usageExitCode = 2;  // Returned for a bad command line, file, option or value.
  };

  // `reader` is the program this process is: its command line takes only the options that
  // program reads (conf/options.h, OptionSpec::readBy), and its role ("master", "worker") is the
  // logger's process, the events' "process" and the "<process> exiting" line. An argument of its
  // own, not a field of `spec`, so that no process can leave it out.
  ProcessMain(const std::string& description, Program reader, Spec spec);
  // Raises the soft open-file limit to the hard limit (raiseDescriptorLimit), parses argv,
  // loads the configuration and makes its logger the default one. Returns the
  // configuration, or the code main() returns now: 0 after --help or --print-config (which start
  // nothing, so no exiting line), usageExitCode after the error was reported on stderr and the
  // exiting line logged in the format --log-format asked for (text when it was not given or did
  // not parse). Once logging is set up it opens events.file (an error naming it is a usage
  // error, as a bad option is).
  std::variant<Config, int> start(int argc, char** argv);

  // Logs "<process> exiting <idField>=<id or ?> code=<code>" (an event through events() when the
  // spec asks for clock fields), flushes the logger and returns `code`: main() ends with
  // `return exit(...)`.
  int exit(const std::string& id, int code);

  // Where the process's events go: the log lines, and the events.file once start() opened it.
  // Lives as long as this object: main() passes it to the process it runs.
  EventSink& events() { return events_; }
  // The events.file sink (its writeFailures() for /metrics: http::addEventsFileMetrics), null
  // without events.file or before start() opened it. Lives as long as this object.
  const JsonLinesFileEventSink* eventsFile() const { return fileEvents_.get(); }

  // The open-file limit start() raised; the process logs it with the connection caps it fits.
  const DescriptorLimit& descriptorLimit() const { return descriptorLimit_; }

 private:
  // Ends a run refused before logging was set up from the configuration.
  int exitBeforeStart(int code);

  const Spec spec_;
  const Program reader_;
  const std::string process_;  // programRole(reader_).
  LogEventSink logEvents_;
  kj::Own<JsonLinesFileEventSink> fileEvents_;  // Null without events.file.
  FanOutEventSink events_;
  CLI::App app_;
  ConfigCommandLine commandLine_;
  DescriptorLimit descriptorLimit_;
};

}  // namespace regent
