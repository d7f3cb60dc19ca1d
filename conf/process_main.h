// The opening and the last line every regent process's main() shares, written once: the command
// line (ConfigCommandLine with --print-config and --log-format), the configuration, the logger,
// and the "<process> exiting" line that ends every run that is not --help or --print-config.
// Used on the main thread before any event loop exists; docs/operations.md lists each process's
// options and exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <variant>

#include "common/descriptor_limit.h"
#include "conf/command_line.h"
#include "conf/config.h"

namespace regent {

class ProcessMain final {
 public:
  struct Spec {
    std::string program;        // "regent-worker": the app's name, starts every option error.
    std::string process;        // "worker": the logger's process and "<process> exiting".
    Program reader;             // Its command line takes only the options this program reads.
    std::string idField;        // "resource_id": the exiting line's id field ("?" while unknown).
    bool clockFields = false;   // The exiting line also carries mono_us and wall_ms.
    int usageExitCode = 2;      // Returned for a bad command line, file, option or value.
  };

  ProcessMain(const std::string& description, Spec spec);
  ProcessMain(const ProcessMain&) = delete;
  ProcessMain& operator=(const ProcessMain&) = delete;

  // Raises the soft open-file limit to the hard limit (raiseDescriptorLimit), parses argv,
  // loads the configuration and makes its logger the default one. Returns the
  // configuration, or the code main() returns now: 0 after --help or --print-config (which start
  // nothing, so no exiting line), usageExitCode after the error was reported on stderr and the
  // exiting line logged in the format --log-format asked for (text when it was not given or did
  // not parse).
  std::variant<Config, int> start(int argc, char** argv);

  // Logs "<process> exiting <idField>=<id or ?> code=<code>" (with mono_us and wall_ms when the
  // spec asks), flushes the logger and returns `code`: main() ends with `return exit(...)`.
  int exit(const std::string& id, int code) const;

  // The open-file limit start() raised; the process logs it with the connection caps it fits.
  const DescriptorLimit& descriptorLimit() const { return descriptorLimit_; }

 private:
  // Ends a run refused before logging was set up from the configuration.
  int exitBeforeStart(int code) const;

  const Spec spec_;
  CLI::App app_;
  ConfigCommandLine commandLine_;
  DescriptorLimit descriptorLimit_;
};

}  // namespace regent
