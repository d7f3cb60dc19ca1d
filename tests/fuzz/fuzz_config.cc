// Fuzz target: the configuration loader over all three of its outside sources at once: the YAML
// file (--config), REGENT_* environment variables and --set values. A configuration that loads
// must answer every option through its typed getter, render, and give back text that parses to
// the same value.
//
// Input: the file text, a NUL byte, environment lines "NAME=value", a NUL byte, --set lines
// "key=value". Missing parts are empty (no environment, no --set); with no NUL at all there is
// no file either when the input is empty.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "conf/config.h"
#include "conf/options.h"

namespace {

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// The loader reads its file by path: an in-memory file, reached through /proc/self/fd.
class MemoryFile final {
 public:
  MemoryFile() : fd_(memfd_create("regent-fuzz-config", 0)) {
    if (fd_ < 0) std::abort();
  }
  ~MemoryFile() { close(fd_); }

  std::string write(std::string_view text) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    if (pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) std::abort();
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

void checkLoaded(const regent::Config& config) {
  using regent::OptionType;
  for (const regent::OptionSpec& spec : regent::allOptions()) {
    switch (spec.type) {
      case OptionType::kString:
      case OptionType::kEnum:
        (void)config.getString(spec.key);
        break;
      case OptionType::kInt:
        (void)config.getInt(spec.key);
        break;
      case OptionType::kDouble:
        (void)config.getDouble(spec.key);
        break;
      case OptionType::kBool:
        (void)config.getBool(spec.key);
        break;
      case OptionType::kDuration:
        (void)config.getDuration(spec.key);
        break;
      case OptionType::kSize:
        (void)config.getSize(spec.key);
        break;
    }
    (void)config.source(spec.key).describe();
    // The canonical text is what --print-config shows and what an operator copies back.
    const std::string text = config.text(spec.key);
    auto reparsed = regent::parseOptionValue(spec, text);
    if (!reparsed) std::abort();
    if (spec.type != OptionType::kDouble &&
        regent::formatOptionValue(spec, reparsed.value()) != text) {
      std::abort();
    }
  }
  (void)regent::renderEffectiveConfig(config);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemoryFile file;
  std::string_view input(reinterpret_cast<const char*>(data), size);

  regent::ConfigSources sources;
  const size_t fileEnd = input.find('\0');
  const std::string_view fileText = input.substr(0, fileEnd);
  if (!fileText.empty() || fileEnd != std::string_view::npos) sources.file = file.write(fileText);
  if (fileEnd != std::string_view::npos) {
    std::string_view rest = input.substr(fileEnd + 1);
    const size_t environmentEnd = rest.find('\0');
    for (std::string_view line : splitLines(rest.substr(0, environmentEnd))) {
      const size_t equals = line.find('=');
      if (equals == std::string_view::npos) continue;
      sources.environment[std::string(line.substr(0, equals))] = std::string(line.substr(equals + 1));
    }
    if (environmentEnd != std::string_view::npos) {
      for (std::string_view line : splitLines(rest.substr(environmentEnd + 1))) {
        sources.set.emplace_back(line);
      }
    }
  }

  auto config = regent::loadConfig(sources);
  if (config) {
    checkLoaded(config.value());
  } else if (config.error().message.empty()) {
    std::abort();  // Every refusal names what is wrong.
  }
  return 0;
}
