// The resource provider a master's resourcemanager.provider names (docs/workers.md, "Workers
// started on demand"), built once per process from its configuration: it outlives every
// leadership term, whose ResourceManager drives it.
#pragma once

#include <kj/memory.h>

#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/result.h"
#include "conf/config.h"
#include "services/resourcemanager/worker_pool.h"
#include "services/resourcemanager/worker_provider.h"

namespace regent::master {

// The provider, or null for `standalone` (no worker is ever started). Fails naming the option
// that is wrong (a worker binary that is not executable, a data root that cannot be created).
Result<kj::Own<resourcemanager::WorkerProvider>> createWorkerProvider(EventLoop& loop,
                                                                      const Config& config,
                                                                      EventSink& events);

// resourcemanager.workers.* (the provider's name, slot count and profile are the provider's).
resourcemanager::WorkerPoolOptions workerPoolOptionsFrom(const Config& config);

}  // namespace regent::master
