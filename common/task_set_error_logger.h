// The kj::TaskSet error handler every component uses: it logs "<component> task failed: <why>".
// A task set's tasks are the component's own work; a failure that reaches the set has nobody
// else to report it to, so it is logged, never rethrown.
#pragma once

#include <kj/async.h>
#include <spdlog/common.h>

#include <string>

namespace regent {

// Logs each failed task of a kj::TaskSet at `level` (error unless told otherwise; debug for
// tasks whose failure is routine, such as a peer's connection ending). Called on the thread
// that runs the task set's event loop. Must outlive the TaskSet it is given to.
class TaskSetErrorLogger final : public kj::TaskSet::ErrorHandler {
 public:
  explicit TaskSetErrorLogger(std::string component,
                              spdlog::level::level_enum level = spdlog::level::err)
      : component_(std::move(component)), level_(level) {}

  void taskFailed(kj::Exception&& exception) override;

  // The line taskFailed() logs for `exception`.
  std::string describe(const kj::Exception& exception) const;

 private:
  const std::string component_;
  const spdlog::level::level_enum level_;
};

}  // namespace regent
