// LeaderTerm (see leader_term.h): open the stores, recover, serve; end in a fixed order.
#include "services/master/leader_term.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "conf/values.h"
#include "services/dispatcher/dispatcher_gateway.h"

namespace regent::master {

LeaderTerm::LeaderTerm(kj::Timer& timer, uint64_t epoch, rpc::FencingCounters& counters,
                       store::StoreServices& storeServices, store::StoreTerm storeTerm,
                       LeaderTermOptions options)
    : timer_(timer),
      epoch_(epoch),
      capabilities_(epoch, counters),
      storeServices_(storeServices),
      storeTerm_(std::move(storeTerm)),
      options_(std::move(options)),
      backoff_(options_.retryInitial, options_.retryMax, options_.jitter) {}

LeaderTerm::~LeaderTerm() noexcept {
  // Handlers first: they must not run on against the services destroyed below.
  capabilities_.revoke("leadership revoked");
  canceler_.cancel("the leadership term of epoch " + std::to_string(epoch_) + " ended");
}

kj::Promise<void> LeaderTerm::start() {
  return canceler_.wrap(openStores().then([this]() { return recover(); }).then([this]() {
    capabilities_.markReady();
  }));
}

kj::Promise<void> LeaderTerm::openStores() {
  return storeServices_.openTerm(storeTerm_).then(
      [this](store::StoreResult<kj::Own<store::LeaderStores>>&& opened) -> kj::Promise<void> {
        if (!opened.ok()) {
          return afterFailure("cannot open the stores: " + opened.error().message)
              .then([this]() { return openStores(); });
        }
        stores_ = kj::mv(opened).value();
        dispatcher_ = kj::heap<dispatcher::Dispatcher>(
            epoch_, *stores_, options_.limits, options_.retainCleanResults, options_.nowMs);
        dispatcherGateway_ = capabilities_.serve<wire::DispatcherGateway>(
            kj::heap<dispatcher::DispatcherGatewayServer>(*dispatcher_));
        return kj::READY_NOW;
      });
}

kj::Promise<void> LeaderTerm::recover() {
  return dispatcher_->recover().then([this](Status recovered) -> kj::Promise<void> {
    if (recovered.ok()) return kj::READY_NOW;
    return afterFailure(recovered.error().message).then([this]() { return recover(); });
  });
}

kj::Promise<void> LeaderTerm::afterFailure(const std::string& what) {
  const Duration delay = backoff_.next();
  spdlog::warn("recovery of epoch={} failed: {}; retrying in {}", epoch_, what,
               formatDuration(delay));
  return timer_.afterDelay(delay.count() * kj::MILLISECONDS);
}

kj::Maybe<wire::DispatcherGateway::Client> LeaderTerm::dispatcherGateway() {
  return dispatcherGateway_;
}

kj::Maybe<const dispatcher::Dispatcher&> LeaderTerm::dispatcher() const {
  if (!ready() || dispatcher_.get() == nullptr) return nullptr;
  return *dispatcher_;
}

}  // namespace regent::master
