// The shared opening and exiting line of a regent process's main() (see process_main.h).
#include "services/process/process_main.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <utility>

#include "common/event_line.h"
#include "common/logging.h"

namespace regent {

ProcessMain::ProcessMain(const std::string& description, Program reader, Spec spec)
    : spec_(std::move(spec)),
      reader_(reader),
      process_(programRole(reader)),
      app_(description, spec_.program),
      commandLine_(app_, spec_.program,
                   {.printConfig = true, .logFormat = true, .program = reader_}) {
  events_.add(logEvents_);
}

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
  const Config& config = std::get<Config>(loaded);
  if (!commandLine_.setUpLogging(config, process_, std::cerr)) {
    return exitBeforeStart(spec_.usageExitCode);
  }
  if (const std::string path = config.getString("events.file"); !path.empty()) {
    auto file = JsonLinesFileEventSink::open(
        path, EventOrigin{.process = process_, .pid = int64_t{::getpid()}});
    if (!file.ok()) {
      spdlog::error("events.file: {}", file.error().message);
      return exit("", spec_.usageExitCode);
    }
    fileEvents_ = kj::mv(file).value();
    events_.add(*fileEvents_);
  }
  return loaded;
}

int ProcessMain::exit(const std::string& id, int code) {
  const std::string event = process_ + " exiting";
  const std::string idValue = id.empty() ? "?" : id;
  if (spec_.clockFields) {
    events_.emit(Event(event).field(spec_.idField, idValue).field("code", code));
  } else {
    spdlog::info("{}", EventLine(event).field(spec_.idField, idValue).field("code", code).str());
  }
  spdlog::default_logger()->flush();
  return code;
}

int ProcessMain::exitBeforeStart(int code) {
  LogOptions options;
  options.process = process_;
  const CLI::Option* format = app_.get_option_no_throw("--log-format");
  if (format != nullptr && format->count() > 0 && format->results().back() == "json") {
    options.format = LogFormat::kJson;
  }
  if (!setupLogging(options).ok()) return code;
  return exit("", code);
}

}  // namespace regent
