// The TaskRunner's updates and the NoTaskRunner (see task_runner.h).
#include "services/taskexecutor/task_runner.h"

namespace regent::taskexecutor {

const char* phaseName(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kRunning:
      return "RUNNING";
    case TaskPhase::kFinished:
      return "FINISHED";
    case TaskPhase::kFailed:
      return "FAILED";
    case TaskPhase::kCanceled:
      return "CANCELED";
  }
  return "UNKNOWN";
}

std::string outputProblems(const TaskUpdate& update) {
  std::string text;
  for (const auto& [stream, problem] :
       {std::pair<const char*, const std::string*>{"stdout", &update.stdoutProblem},
        {"stderr", &update.stderrProblem}}) {
    if (problem->empty()) continue;
    text += (text.empty() ? "" : "; ") + std::string(stream) + " " + *problem;
  }
  return text;
}

Status NoTaskRunner::start(const TaskSpec& spec, OnUpdate) {
  return Error::fatal("this worker runs no tasks: attempt " + spec.attempt.toHex() +
                      " is not started");
}

}  // namespace regent::taskexecutor
