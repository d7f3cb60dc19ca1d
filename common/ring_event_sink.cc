// RingEventSink (see ring_event_sink.h).
#include "common/ring_event_sink.h"

#include <algorithm>

namespace regent {

RingEventSink::RingEventSink(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {
  events_.reserve(capacity_);
}

void RingEventSink::emit(const Event& event) {
  ++emitted_;
  if (events_.size() < capacity_) {
    events_.push_back(event);
    return;
  }
  events_[next_] = event;
  next_ = (next_ + 1) % capacity_;
}

std::vector<Event> RingEventSink::recent() const {
  std::vector<Event> out;
  out.reserve(events_.size());
  for (size_t i = 0; i < events_.size(); ++i) out.push_back(events_[(next_ + i) % events_.size()]);
  return out;
}

}  // namespace regent
