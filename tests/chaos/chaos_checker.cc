#include "tests/chaos/chaos_checker.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace regent::testing::chaos {
namespace {

constexpr WallMs kForever = std::numeric_limits<WallMs>::max();

std::string describe(const Grant& grant) {
  return "granted epoch=" + std::to_string(grant.epoch) + " master=" + grant.master +
         " wall_ms=" + std::to_string(grant.at);
}

std::string describe(const ServingClaim& claim) {
  return "SERVING epoch=" + std::to_string(claim.epoch) + " master=" + claim.master +
         " sent_us=" + std::to_string(claim.sentUs) +
         " received_us=" + std::to_string(claim.receivedUs);
}

std::string describe(const JobEnd& end) {
  return "job ended job=" + end.job + " state=" + end.state + " master=" + end.master +
         " wall_ms=" + std::to_string(end.at);
}

std::string describe(const TaskMark& mark) {
  std::string text = std::string(mark.start ? "task start" : "task end") + " job=" + mark.job +
                     " vertex=" + mark.vertex + " subtask=" + std::to_string(mark.subtask) +
                     " attempt=" + mark.attempt +
                     " attempt_number=" + std::to_string(mark.attemptNumber) +
                     " pid=" + std::to_string(mark.pid);
  if (!mark.start) text += " exit_code=" + std::to_string(mark.exitCode);
  return text + " wall_ms=" + std::to_string(mark.at);
}

std::string describe(const AttemptFinished& finished) {
  return "attempt FINISHED job=" + finished.job + " vertex=" + finished.vertex +
         " subtask=" + std::to_string(finished.subtask) + " attempt=" + finished.attempt +
         " master=" + finished.master + " wall_ms=" + std::to_string(finished.at);
}

std::string describe(const WorkerEpoch& seen) {
  return "worker " + seen.run + " resource_id=" + seen.resourceId +
         (seen.method.empty() ? " registered" : " admitted " + seen.method) +
         " epoch=" + std::to_string(seen.epoch) + " wall_ms=" + std::to_string(seen.at);
}

using SubtaskKey = std::tuple<std::string, std::string, uint32_t>;  // job, vertex, subtask.

SubtaskKey keyOf(const TaskMark& mark) { return {mark.job, mark.vertex, mark.subtask}; }

std::string describeKey(const SubtaskKey& key) {
  return "job=" + std::get<0>(key) + " vertex=" + std::get<1>(key) +
         " subtask=" + std::to_string(std::get<2>(key));
}

// One attempt as the marks and the workers tell it.
struct AttemptLife {
  TaskMark start;
  std::optional<TaskMark> end;  // Its own end mark.
  std::string resourceId;       // Its worker ("" when no worker reported it).
  // The earliest sign of it on its worker: the master's "attempt deployed", the worker's "task
  // started", or its own start mark. A task may write its start mark after its worker was
  // SIGKILLed (spawned just before, it runs on for a moment), so a worker fault counts from here.
  WallMs deployedAt = 0;
  WallMs endedAt = kForever;    // The earliest sign of its end.
  std::string endedBy;          // What that sign was.
};

class Checker {
 public:
  explicit Checker(const History& history) : h_(history) { buildAttempts(); }

  std::vector<Violation> run() {
    checkEpochs();
    checkJobsKept();
    checkJobEnds();
    checkLiveAttempts();
    checkFinishedNotRerun();
    checkRestartsHaveCauses();
    checkFinalState();
    return std::move(violations_);
  }

 private:
  void add(char invariant, std::string what, std::vector<std::string> lines, WallMs at) {
    violations_.push_back(Violation{invariant, std::move(what), std::move(lines), at});
  }

  void buildAttempts() {
    std::map<std::string, std::string> workerOf;         // attempt -> resource id.
    std::map<std::string, WallMs> workerSawStart;        // attempt -> earliest start sign.
    std::map<std::string, WallMs> workerSawEnd;          // attempt -> "task ended".
    for (const WorkerTask& task : h_.workerTasks) {
      if (!task.ended) {
        workerOf.emplace(task.attempt, task.resourceId);
        auto [seen, first] = workerSawStart.emplace(task.attempt, task.at);
        if (!first) seen->second = std::min(seen->second, task.at);
      } else if (!workerSawEnd.count(task.attempt)) {
        workerSawEnd[task.attempt] = task.at;
      }
    }
    std::map<std::string, TaskMark> ends;  // attempt -> its end mark.
    for (const TaskMark& mark : h_.marks) {
      if (!mark.start) ends.emplace(mark.attempt, mark);
    }
    for (const TaskMark& mark : h_.marks) {
      if (!mark.start) continue;
      AttemptLife life;
      life.start = mark;
      life.deployedAt = mark.at;
      if (auto it = workerSawStart.find(mark.attempt); it != workerSawStart.end()) {
        life.deployedAt = std::min(life.deployedAt, it->second);
      }
      if (auto it = ends.find(mark.attempt); it != ends.end()) {
        life.end = it->second;
        life.endedAt = it->second.at;
        life.endedBy = "its end mark";
      }
      if (auto it = workerSawEnd.find(mark.attempt);
          it != workerSawEnd.end() && it->second < life.endedAt) {
        life.endedAt = it->second;
        life.endedBy = "its worker's task ended";
      }
      if (auto it = workerOf.find(mark.attempt); it != workerOf.end()) {
        life.resourceId = it->second;
        for (const WorkerFault& fault : h_.workerFaults) {
          if (fault.kind == WorkerFault::Kind::kKill && fault.resourceId == life.resourceId &&
              fault.from >= life.deployedAt && fault.from < life.endedAt) {
            life.endedAt = fault.from;
            life.endedBy = "its worker killed";
          }
        }
      }
      subtasks_[keyOf(mark)].push_back(std::move(life));
    }
    for (auto& [key, lives] : subtasks_) {
      // By attempt number: a stale attempt (its submitTask held by a paused worker) may start
      // after the one that replaced it.
      std::stable_sort(lives.begin(), lives.end(), [](const AttemptLife& a, const AttemptLife& b) {
        return std::tie(a.start.attemptNumber, a.start.at) <
               std::tie(b.start.attemptNumber, b.start.at);
      });
    }
  }

  // The faults on `resourceId` that held at some moment of [from, to]: pauses and cuts, and
  // kills too when `killsToo`.
  std::vector<const WorkerFault*> faultsOn(const std::string& resourceId, WallMs from, WallMs to,
                                           bool killsToo) const {
    std::vector<const WorkerFault*> found;
    if (resourceId.empty()) return found;
    for (const WorkerFault& fault : h_.workerFaults) {
      if (fault.resourceId != resourceId) continue;
      if (!killsToo && fault.kind == WorkerFault::Kind::kKill) continue;
      // A pause or cut that still held at `from` counts as well as one that began after it.
      const WallMs end = fault.kind == WorkerFault::Kind::kKill ? fault.from : fault.to;
      if (fault.from <= to && end >= from) found.push_back(&fault);
    }
    return found;
  }

  // (a)
  void checkEpochs() {
    std::map<uint64_t, std::vector<const Grant*>> byEpoch;
    for (const Grant& grant : h_.grants) byEpoch[grant.epoch].push_back(&grant);
    for (const auto& [epoch, grants] : byEpoch) {
      if (grants.size() < 2) continue;
      std::vector<std::string> lines;
      for (const Grant* grant : grants) lines.push_back(describe(*grant));
      add('a', "epoch " + std::to_string(epoch) + " granted " + std::to_string(grants.size()) +
                   " times",
          lines, grants[1]->at);
    }
    std::vector<Grant> ordered = h_.grants;
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const Grant& a, const Grant& b) { return a.at < b.at; });
    for (size_t i = 1; i < ordered.size(); ++i) {
      if (ordered[i].epoch < ordered[i - 1].epoch) {
        add('a', "epochs went back: a later grant holds a lower epoch",
            {describe(ordered[i - 1]), describe(ordered[i])}, ordered[i].at);
      }
    }
    // A claim that went out after a claim of a later epoch was answered: the older leader still
    // said SERVING when the newer one already did.
    const ServingClaim* newest = nullptr;  // Of the claims answered so far, the highest epoch.
    std::vector<const ServingClaim*> bySent;
    for (const ServingClaim& claim : h_.claims) bySent.push_back(&claim);
    std::stable_sort(bySent.begin(), bySent.end(), [](const ServingClaim* a, const ServingClaim* b) {
      return a->sentUs < b->sentUs;
    });
    std::vector<const ServingClaim*> byReceived = bySent;
    std::stable_sort(byReceived.begin(), byReceived.end(),
                     [](const ServingClaim* a, const ServingClaim* b) {
                       return a->receivedUs < b->receivedUs;
                     });
    size_t next = 0;
    std::set<std::string> reported;  // One violation per (stale master, epoch).
    for (const ServingClaim* claim : bySent) {
      while (next < byReceived.size() && byReceived[next]->receivedUs < claim->sentUs) {
        if (!newest || byReceived[next]->epoch > newest->epoch) newest = byReceived[next];
        ++next;
      }
      if (newest && newest->epoch > claim->epoch &&
          reported.insert(claim->master + "/" + std::to_string(claim->epoch)).second) {
        add('a',
            "master " + claim->master + " claimed SERVING epoch " + std::to_string(claim->epoch) +
                " after master " + newest->master + " was seen SERVING epoch " +
                std::to_string(newest->epoch),
            {describe(*newest), describe(*claim)}, 0);
      }
    }
    // A worker obeys no deposed leader: what it acts on never carries an epoch below one it
    // registered with, or acted on, earlier in the same run.
    std::map<std::string, const WorkerEpoch*> newestOfRun;
    for (const WorkerEpoch& seen : h_.workerEpochs) {
      const WorkerEpoch*& newestSeen = newestOfRun[seen.run];
      if (newestSeen && !seen.method.empty() && seen.epoch < newestSeen->epoch) {
        add('a',
            "worker " + seen.run + " acted on a call of epoch " + std::to_string(seen.epoch) +
                " after it took epoch " + std::to_string(newestSeen->epoch),
            {describe(*newestSeen), describe(seen)}, seen.at);
      }
      if (!newestSeen || seen.epoch > newestSeen->epoch) newestSeen = &seen;
    }
    uint64_t highest = 0;
    for (const Grant& grant : h_.grants) highest = std::max(highest, grant.epoch);
    if (highest != 0 && h_.final.zookeeperEpoch != highest) {
      add('a',
          "ZooKeeper's leader node holds epoch " + std::to_string(h_.final.zookeeperEpoch) +
              ", the last epoch granted is " + std::to_string(highest),
          {}, 0);
    }
  }

  // (b) Every result is kept (store.job-results.retain is far above a run's jobs), so the last
  // leader lists every job it was ever told of: one that ended under an earlier leader too.
  void checkJobsKept() {
    for (const SubmittedJob& job : h_.jobs) {
      if (!job.acknowledged || h_.final.jobStates.count(job.id)) continue;
      std::vector<std::string> lines;
      for (const JobEnd& end : h_.jobEnds) {
        if (end.job == job.id) lines.push_back(describe(end));
      }
      add('b',
          "acknowledged job " + job.id + " (" + job.name + ") is lost: the last leader does not list it",
          lines, 0);
    }
  }

  // (c)
  void checkJobEnds() {
    std::map<std::string, std::vector<const JobEnd*>> byJob;
    for (const JobEnd& end : h_.jobEnds) byJob[end.job].push_back(&end);
    for (const auto& [job, ends] : byJob) {
      std::set<std::string> states;
      for (const JobEnd* end : ends) states.insert(end->state);
      auto listed = h_.final.jobStates.find(job);
      if (listed != h_.final.jobStates.end() && isTerminalJobState(listed->second)) {
        states.insert(listed->second);
      }
      if (states.size() > 1) {
        std::vector<std::string> lines;
        for (const JobEnd* end : ends) lines.push_back(describe(*end));
        if (listed != h_.final.jobStates.end()) {
          lines.push_back("the leader lists it " + listed->second);
        }
        add('c', "job " + job + " has " + std::to_string(states.size()) + " terminal states",
            lines, ends.back()->at);
      }
      const JobEnd* first = *std::min_element(
          ends.begin(), ends.end(), [](const JobEnd* a, const JobEnd* b) { return a->at < b->at; });
      for (const TaskMark& mark : h_.marks) {
        if (mark.start && mark.job == job && mark.at > first->at) {
          add('c', "a task of job " + job + " started after the job ended",
              {describe(*first), describe(mark)}, mark.at);
        }
      }
    }
  }

  // (d)
  void checkLiveAttempts() {
    for (const auto& [key, lives] : subtasks_) {
      for (size_t i = 0; i < lives.size(); ++i) {
        for (size_t j = i + 1; j < lives.size(); ++j) {
          const AttemptLife& older = lives[i];
          const AttemptLife& newer = lives[j];
          const WallMs from = std::min(older.start.at, newer.start.at);
          const WallMs to = std::max(older.start.at, newer.start.at);
          if (to >= std::min(older.endedAt, newer.endedAt)) continue;  // One ended first.
          if (!faultsOn(older.resourceId, from, to, false).empty()) continue;
          add('d', "two live attempts of " + describeKey(key),
              {describe(older.start) + " on worker " + older.resourceId +
                   (older.endedAt == kForever ? ", never seen ending"
                                              : ", ended wall_ms=" + std::to_string(older.endedAt) +
                                                    " (" + older.endedBy + ")"),
               describe(newer.start) + " on worker " + newer.resourceId},
              newer.start.at);
        }
      }
    }
  }

  // (e)
  void checkFinishedNotRerun() {
    for (const AttemptFinished& finished : h_.finished) {
      auto it = subtasks_.find({finished.job, finished.vertex, finished.subtask});
      if (it == subtasks_.end()) continue;
      for (const AttemptLife& life : it->second) {
        if (life.start.at > finished.at && life.start.attempt != finished.attempt) {
          add('e', "a finished subtask started again",
              {describe(finished), describe(life.start)}, life.start.at);
          break;
        }
      }
    }
  }

  // (f)
  void checkRestartsHaveCauses() {
    for (const auto& [key, lives] : subtasks_) {
      for (size_t i = 1; i < lives.size(); ++i) {
        const AttemptLife& previous = lives[i - 1];
        const AttemptLife& next = lives[i];
        if (previous.end && previous.end->exitCode != 0) continue;  // Failed by itself.
        if (!faultsOn(previous.resourceId, std::min(previous.deployedAt, next.start.at),
                      std::max(previous.start.at, next.start.at), true)
                 .empty()) {
          continue;  // Its worker was killed, paused or cut.
        }
        std::vector<std::string> lines = {describe(previous.start)};
        if (previous.end) lines.push_back(describe(*previous.end));
        lines.push_back("on worker " +
                        (previous.resourceId.empty() ? std::string("(none reported it)")
                                                     : previous.resourceId) +
                        ", with no fault on it in between");
        lines.push_back(describe(next.start));
        add('f', "an attempt of " + describeKey(key) + " was started again without a cause",
            lines, next.start.at);
      }
    }
  }

  // (g)
  void checkFinalState() {
    const FinalState& f = h_.final;
    if (f.servingMasters.size() != 1) {
      std::string who;
      for (const std::string& master : f.servingMasters) who += " " + master;
      add('g', std::to_string(f.servingMasters.size()) + " masters SERVING after the last heal:" +
                   (who.empty() ? " none" : who),
          {}, 0);
    }
    for (const std::string& worker : f.liveWorkers) {
      if (!f.registeredWorkers.count(worker)) {
        add('g', "live worker " + worker + " is not registered with the leader", {}, 0);
      }
    }
    for (const AllocatedSlot& slot : f.allocatedSlots) {
      auto state = f.jobStates.find(slot.job);
      if (state == f.jobStates.end() || isTerminalJobState(state->second)) {
        add('g',
            "slot " + slot.resourceId + "/" + std::to_string(slot.index) + " is held by job " +
                slot.job + ", which " +
                (state == f.jobStates.end() ? std::string("the leader does not list")
                                            : "ended " + state->second),
            {}, 0);
      }
    }
    for (pid_t pid : f.leftoverPids) {
      std::vector<std::string> lines;
      for (const TaskMark& mark : h_.marks) {
        if (mark.start && mark.pid == pid) lines.push_back(describe(mark));
      }
      add('g', "task process " + std::to_string(pid) + " still runs after every job ended",
          lines, 0);
    }
    for (const SubmittedJob& job : h_.jobs) {
      if (!job.acknowledged) continue;
      auto state = f.jobStates.find(job.id);
      if (state != f.jobStates.end() && !isTerminalJobState(state->second)) {
        add('g', "job " + job.id + " (" + job.name + ") is still " + state->second +
                     " after everything was released",
            {}, 0);
      }
    }
  }

  const History& h_;
  std::map<SubtaskKey, std::vector<AttemptLife>> subtasks_;
  std::vector<Violation> violations_;
};

}  // namespace

bool isTerminalJobState(const std::string& state) {
  return state == "FINISHED" || state == "FAILED" || state == "CANCELED";
}

std::vector<Violation> checkHistory(const History& history) { return Checker(history).run(); }

const Round* roundAt(const History& history, WallMs at) {
  if (at == 0) return nullptr;
  const Round* found = nullptr;
  for (const Round& round : history.rounds) {
    if (round.from <= at) found = &round;
  }
  return found;
}

std::string describeViolation(const History& history, uint64_t seed, const Violation& violation) {
  std::ostringstream out;
  out << "chaos violation (" << violation.invariant << ") seed=" << seed;
  if (const Round* round = roundAt(history, violation.at)) {
    out << " round=" << round->number << " fault=" << round->fault << " target=" << round->target;
  } else {
    out << " round=final";
  }
  out << ": " << violation.what << "\n";
  for (const std::string& line : violation.lines) out << "    " << line << "\n";
  return out.str();
}

}  // namespace regent::testing::chaos
