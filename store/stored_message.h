// An owned, fully validated Cap'n Proto message read back from a store (a JobGraph or a
// JobResult): decoding copies it out of the packed record, which checks every pointer.
#pragma once

#include <capnp/message.h>
#include <kj/memory.h>

#include <string>

namespace regent::store {

template <typename Struct>
class StoredMessage final {
 public:
  using Reader = typename Struct::Reader;

  StoredMessage(kj::Own<capnp::MallocMessageBuilder> message, std::string packed)
      : message_(kj::mv(message)),
        root_(message_->template getRoot<Struct>().asReader()),
        packed_(std::move(packed)) {}

  // Valid while this object lives (moving it keeps the message where it is).
  Reader get() const { return root_; }
  // The record exactly as stored (packed Cap'n Proto); for a progress record with parts, the
  // record with its parts merged back, packed.
  const std::string& packed() const { return packed_; }

 private:
  kj::Own<capnp::MallocMessageBuilder> message_;
  Reader root_;
  std::string packed_;
};

// A record that did not decode: reported by listing and recovery, skipped, and left in place
// for an operator (never deleted by the store).
struct CorruptRecord {
  std::string key;     // The job id as stored (may itself be malformed).
  std::string reason;  // Why it does not decode.
};

}  // namespace regent::store
