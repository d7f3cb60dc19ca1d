// The most recent events of a process, kept in memory: what a status page shows as "recent
// events". Bounded: the oldest event makes room for the newest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/event_sink.h"

namespace regent {

// Owned by the loop thread; not thread-safe.
class RingEventSink final : public EventSink {
 public:
  // Keeps the last `capacity` events (at least one).
  explicit RingEventSink(size_t capacity);

  void emit(const Event& event) override;

  // The events kept, oldest first: the last min(capacity, emitted()) emitted.
  std::vector<Event> recent() const;
  // How many events were emitted in all, kept or not.
  uint64_t emitted() const { return emitted_; }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  std::vector<Event> events_;  // Grows to capacity_, then wraps at next_.
  size_t next_ = 0;            // Where the next event goes once full: the oldest one.
  uint64_t emitted_ = 0;
};

}  // namespace regent
