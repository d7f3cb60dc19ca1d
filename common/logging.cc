// spdlog set-up and the JSON-lines formatter.
#include "common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace regent {
namespace {

// One JSON object per line: {"ts","level","logger","thread","msg"}; the message is escaped
// by the JSON library, so quotes and newlines in it cannot break the line.
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    auto sinceEpoch = msg.time.time_since_epoch();
    auto millis = duration_cast<milliseconds>(sinceEpoch).count();
    std::time_t seconds = static_cast<std::time_t>(millis / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char stamp[32];
    size_t n = std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(stamp + n, sizeof(stamp) - n, ".%03dZ", static_cast<int>(millis % 1000));

    auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::json line = {
        {"ts", stamp},
        {"level", std::string(level.data(), level.size())},
        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"thread", msg.thread_id},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
    auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLineFormatter>();
  }
};

}  // namespace

Status setupLogging(const LogOptions& options, std::shared_ptr<spdlog::sinks::sink> sink) {
  auto level = spdlog::level::from_str(options.level);
  // from_str maps anything unknown to "off"; only "off" itself may mean off.
  if (level == spdlog::level::off && options.level != "off") {
    return Error::fatal("unknown log level \"" + options.level +
                        "\": expected trace, debug, info, warn, error, critical or off");
  }
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(options.process, std::move(sink));
  if (options.format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonLineFormatter>());
  } else {
    logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ [%n] %v"));
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  return {};
}

}  // namespace regent
