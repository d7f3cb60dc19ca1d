// The WorkerProvider: what the active ResourceManager needs of whatever starts workers for it
// (resourcemanager.provider; docs/workers.md, "Workers started on demand"). A role-named seam
// with mechanism-named implementations in services/providers/ (the process provider starts
// regent-worker processes on the leader's host), as leader/ does for the election. A provider
// lives as long as the master process, across leadership terms: the workers it starts outlive the
// term that started them, and the next leader finds them with list().
//
// Every worker a provider starts registers with the provider id "<name>:<id>"
// (worker.provider-id), so that any leader tells it from a worker started by hand, counts it as
// started, and may release it when idle. Releasing is the ResourceManager asking the worker to
// stop over its own connection (TaskExecutorGateway.stop: it works across hosts), then the
// provider's release() making sure it is gone.
#pragma once

#include <kj/async.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "common/time.h"
#include "services/resourcemanager/resource_profile.h"

namespace regent::resourcemanager {

// Whether a registration claiming to be a provider's worker is that worker, as far as the
// provider can tell (the process provider: the pid it started under that id).
enum class Vouch { kYes, kNo, kUnknown };

// Told when a worker the provider started ends (its process exited, its container stopped).
class WorkerProviderListener {
 public:
  virtual void workerEnded(const std::string& id, const std::string& reason) = 0;

 protected:
  ~WorkerProviderListener() = default;
};

// Loop-thread only; never blocks the loop (slow work runs off it, or is asynchronous).
class WorkerProvider {
 public:
  virtual ~WorkerProvider() = default;

  // "process": the provider id prefix and the name in its event lines.
  virtual const std::string& name() const = 0;
  // What each worker it starts offers: worker.slots slots of worker.slot-cpu / slot-memory.
  virtual uint32_t slotsPerWorker() const = 0;
  virtual Profile slotProfile() const = 0;

  // Starts a worker that registers as "<name>:<id>"; `epoch` is the starting leader's (kept
  // with the worker for people). Resolves once started, not registered; an error names what
  // failed ("cannot start /opt/regent/bin/regent-worker: no such file or directory"). Never
  // rejects.
  virtual kj::Promise<Status> start(const std::string& id, uint64_t epoch) = 0;
  // Makes sure the worker is gone and forgets it: it was asked to stop, so it has `grace` to
  // exit on its own before the provider ends it. Never rejects.
  virtual kj::Promise<Status> release(const std::string& id, Duration grace) = 0;
  // The ids of the workers of this cluster this provider started (in any term) that are alive.
  // Never rejects.
  virtual kj::Promise<Result<std::vector<std::string>>> list() = 0;
  // Whether the worker registered as `pid` on `host` is the one this provider started as `id`:
  // kNo when the provider follows `id` and it is another process (another worker claiming the
  // id: it is never taken for the provider's, so never released); kUnknown when the provider
  // does not follow `id` (started from another host, say).
  virtual Vouch vouches(const std::string& id, const std::string& host, uint32_t pid) const = 0;
  // Who is told when a started worker ends; nullptr: nobody. The ResourceManager of the term
  // sets it and clears it before it is destroyed.
  virtual void setListener(WorkerProviderListener* listener) = 0;
};

}  // namespace regent::resourcemanager
