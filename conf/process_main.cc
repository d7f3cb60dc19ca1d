// The shared opening and exiting line of a regent process's main() (see process_main.h).
#include "conf/process_main.h"

#include <spdlog/spdlog.h>

#include <iostream>
#include <utility>

#include "common/event_line.h"
#include "common/logging.h"
#include "common/time.h"

namespace regent {

ProcessMain::ProcessMain(const std::string& description, Spec spec)
    : spec_(std::move(spec)),
      app_(description, spec_.program),
      commandLine_(app_, spec_.program,
                   {.printConfig = true, .logFormat = true, .program = spec_.reader}) {}

std::variant<Config, int> ProcessMain::start(int argc, char** argv) {
  descriptorLimit_ = raiseDescriptorLimit();
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (app_.exit(error) == 0) return 0;
    return exitBeforeStart(spec_.usageExitCode);
  }

  auto loaded = commandLine_.load(std::cout, std::cerr, spec_.usageExitCode);
  if (const int* exitCode = std::get_if<int>(&loaded)) {
    return *exitCode == 0 ? 0 : exitBeforeStart(*exitCode);
  }
  if (!commandLine_.setUpLogging(std::get<Config>(loaded), spec_.process, std::cerr)) {
    return exitBeforeStart(spec_.usageExitCode);
  }
  return loaded;
}

int ProcessMain::exit(const std::string& id, int code) const {
  EventLine line(spec_.process + " exiting");
  line.field(spec_.idField, id.empty() ? "?" : id).field("code", code);
  if (spec_.clockFields) {
    line.field("mono_us", monotonicMicros()).field("wall_ms", wallClockMillis());
  }
  spdlog::info("{}", line.str());
  spdlog::default_logger()->flush();
  return code;
}

int ProcessMain::exitBeforeStart(int code) const {
  LogOptions options;
  options.process = spec_.process;
  const CLI::Option* format = app_.get_option_no_throw("--log-format");
  if (format != nullptr && format->count() > 0 && format->results().back() == "json") {
    options.format = LogFormat::kJson;
  }
  if (!setupLogging(options).ok()) return code;
  return exit("", code);
}

}  // namespace regent
