// The stores' encoding over a RecordStore backend: JobGraphs, JobResults and job progress as
// packed Cap'n Proto records, validated on the way in and fully checked on the way out;
// dirty/clean results and their retention; a large job's progress split into parts. Backends
// only keep bytes; everything about records lives here, once.
#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <capnp/serialize.h>
#include <kj/debug.h>
#include <kj/io.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rpc/wire_ids.h"
#include "store/store_services.h"

namespace regent::store {
namespace {

// The decoder's traversal limit (64 MiB unpacked). put() refuses messages above it, so every
// record the stores write can be read back.
constexpr uint64_t kMaxMessageWords = 8 * 1024 * 1024;

kj::Promise<StoreResult<void>> readyError(StoreError error) {
  return kj::Promise<StoreResult<void>>(StoreResult<void>(kj::mv(error)));
}

std::string describeJob(const JobId& id, kj::StringPtr name) {
  std::string text = "job " + id.toHex();
  constexpr size_t kShownName = 80;
  if (name.size() > kShownName) {
    text += " (\"" + std::string(name.cStr(), kShownName) + "...\")";
  } else if (name.size() > 0) {
    text += " (\"" + std::string(name.cStr()) + "\")";
  }
  return text;
}

// Packs `builder` into a record; kTooLarge over the decoder's or the backend's limit.
StoreResult<std::string> pack(capnp::MallocMessageBuilder& builder, const std::string& what,
                              const RecordStore& records) {
  const size_t maxRecordSize = records.maxRecordSize();
  const uint64_t words = capnp::computeSerializedSizeInWords(builder);
  if (words > kMaxMessageWords) {
    return StoreError::tooLarge(what + " is " + std::to_string(words * 8) +
                                " bytes unpacked, over the decoder's limit of " +
                                std::to_string(kMaxMessageWords * 8) + " bytes");
  }
  kj::VectorOutputStream output;
  capnp::writePackedMessage(output, builder);
  const kj::ArrayPtr<kj::byte> bytes = output.getArray();
  if (bytes.size() > maxRecordSize) {
    StoreError error = StoreError::tooLarge(
        what + " is " + std::to_string(bytes.size()) + " bytes packed, over the store's limit of " +
        std::to_string(maxRecordSize) + " bytes (" + records.maxRecordSizeOption() +
        "); nothing was written");
    error.sizeBytes = bytes.size();
    error.limitBytes = maxRecordSize;
    return error;
  }
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// Copies the caller's message into `builder`: a malformed reader (from the network) is kInvalid.
template <typename Reader>
StoreResult<void> copyInto(capnp::MallocMessageBuilder& builder, Reader root, const char* what) {
  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] { builder.setRoot(root); })) {
    return StoreError::invalid(std::string(what) + " is malformed: " +
                               exception->getDescription().cStr());
  }
  return {};
}

constexpr const char* kNotAJobId = "the key is not a job id (32 hex digits)";

// kj describes a failed check as "expected <condition>; <message>": keep the message.
std::string decodeFailure(const kj::Exception& exception) {
  std::string text = exception.getDescription().cStr();
  const size_t separator = text.rfind("; ");
  if (text.rfind("expected ", 0) == 0 && separator != std::string::npos) {
    text = text.substr(separator + 2);
  }
  return text;
}

void readEveryField(capnp::DynamicStruct::Reader value, uint64_t& budget);

// Whether a list of `type` holds pointers (structs, lists, text, data): those elements are read;
// numbers, enums and Void need no check.
bool holdsPointers(capnp::schema::Type::Which type) {
  switch (type) {
    case capnp::schema::Type::TEXT:
    case capnp::schema::Type::DATA:
    case capnp::schema::Type::LIST:
    case capnp::schema::Type::STRUCT:
    case capnp::schema::Type::INTERFACE:
    case capnp::schema::Type::ANY_POINTER:
      return true;
    default:
      return false;
  }
}

void readEveryValue(capnp::DynamicValue::Reader value, uint64_t& budget) {
  switch (value.getType()) {
    case capnp::DynamicValue::STRUCT:
      readEveryField(value.as<capnp::DynamicStruct>(), budget);
      break;
    case capnp::DynamicValue::LIST: {
      auto list = value.as<capnp::DynamicList>();
      if (!holdsPointers(list.getSchema().whichElementType())) break;
      // Each element of a list of pointers takes a word of the record at least, except structs
      // of no size, which a crafted record can list by the billion in one word: more elements
      // than the record has words is such a list, and walking it would take minutes.
      if (list.size() > budget) {
        kj::throwFatalException(KJ_EXCEPTION(
            FAILED, kj::str("a list of ", list.size(), " elements in a record of fewer words (",
                            "its elements take no space: an amplified list)")));
      }
      budget -= list.size();
      for (auto element : list) readEveryValue(element, budget);
      break;
    }
    default:
      break;  // Text and data were checked when read; numbers need no check.
  }
}

// Reads every field as its schema types it, so a pointer of the wrong kind (a list where the job
// name's text belongs) throws while decoding: the copy checks only that pointers are sound, and
// the record's readers (recovery, job status) would otherwise throw later, on every read.
// `budget`: the list elements still allowed, the record's size in words to begin with.
void readEveryField(capnp::DynamicStruct::Reader value, uint64_t& budget) {
  for (capnp::StructSchema::Field field : value.getSchema().getNonUnionFields()) {
    if (value.has(field)) readEveryValue(value.get(field), budget);
  }
  KJ_IF_MAYBE (field, value.which()) {
    if (value.has(*field)) readEveryValue(value.get(*field), budget);
  }
}

// Unpacking turns two bytes into at most 256 words (a tag of zero and a run count), so `size`
// packed bytes hold at most this many words.
uint64_t maxUnpackedWords(size_t size) { return (static_cast<uint64_t>(size) / 2 + 1) * 256; }

// The words the segment table at the start of packed `bytes` claims (segments and table);
// nullopt when there is no whole table (the decoder then says what is wrong). May throw on
// malformed packing, like the decoder.
std::optional<uint64_t> claimedWords(const std::string& bytes) {
  kj::ArrayInputStream input(
      kj::arrayPtr(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size()));
  capnp::_::PackedInputStream unpacked(input);
  kj::byte first[8];
  if (unpacked.tryRead(first, 8, 8) < 8) return std::nullopt;
  const auto u32 = [](const kj::byte* at) {
    return static_cast<uint32_t>(at[0]) | static_cast<uint32_t>(at[1]) << 8 |
           static_cast<uint32_t>(at[2]) << 16 | static_cast<uint32_t>(at[3]) << 24;
  };
  const uint64_t segments = uint64_t{u32(first)} + 1;
  constexpr uint64_t kMostSegments = 512;  // The decoder refuses more.
  if (segments > kMostSegments) return std::nullopt;
  uint64_t words = u32(first + 4);
  // The other sizes follow, padded to a whole word.
  const uint64_t tableWords = (segments + 2) / 2;
  std::vector<kj::byte> rest((tableWords - 1) * 8);
  if (!rest.empty() && unpacked.tryRead(rest.data(), rest.size(), rest.size()) < rest.size()) {
    return std::nullopt;
  }
  for (uint64_t i = 1; i < segments; ++i) words += u32(rest.data() + (i - 1) * 4);
  return words + tableWords;
}

// Decodes a packed record, checking every pointer (the copy traverses the whole message) and its
// type against the schema, and that nothing trails it.
template <typename Struct>
StoreResult<kj::Own<capnp::MallocMessageBuilder>> decodeMessage(const std::string& bytes) {
  kj::Own<capnp::MallocMessageBuilder> message;
  bool trailing = false;
  std::optional<uint64_t> claimed;
  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] {
                 // Refused before the decoder allocates (and zeroes) what the table claims, up
                 // to 64 MiB for three bytes.
                 claimed = claimedWords(bytes);
                 if (claimed && *claimed > maxUnpackedWords(bytes.size())) return;
                 kj::ArrayInputStream input(
                     kj::arrayPtr(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size()));
                 capnp::ReaderOptions options;
                 options.traversalLimitInWords = kMaxMessageWords;
                 capnp::PackedMessageReader reader(input, options);
                 auto root = reader.getRoot<Struct>();
                 // One segment of the exact size: the default first segment (8 KiB, zeroed) is
                 // most of the cost of decoding a small record.
                 const uint64_t words = root.totalSize().wordCount + 1;
                 message = kj::heap<capnp::MallocMessageBuilder>(
                     static_cast<unsigned>(std::min<uint64_t>(words, kMaxMessageWords)));
                 message->setRoot(root);
                 uint64_t budget = words;
                 readEveryField(capnp::toDynamic(message->getRoot<Struct>().asReader()), budget);
                 kj::byte extra;
                 trailing = input.tryRead(&extra, 1, 1) > 0;
               })) {
    return StoreError::corrupt("does not decode (" + std::to_string(bytes.size()) +
                               " bytes): " + decodeFailure(*exception));
  }
  if (claimed && *claimed > maxUnpackedWords(bytes.size())) {
    return StoreError::corrupt("does not decode (" + std::to_string(bytes.size()) +
                               " bytes): its segment table claims " + std::to_string(*claimed) +
                               " words, more than " + std::to_string(bytes.size()) +
                               " packed bytes can hold");
  }
  if (trailing) return StoreError::corrupt("has bytes after the message");
  return kj::mv(message);
}

// Decodes a record stored under `key` (decodeMessage) and checks that it carries the job id
// `key` names.
template <typename Struct>
StoreResult<StoredMessage<Struct>> decode(const std::string& key, std::string bytes) {
  if (!JobId::fromHex(key)) return StoreError::corrupt(kNotAJobId);
  auto message = decodeMessage<Struct>(bytes);
  if (!message.ok()) return message.error();
  auto root = message.value()->template getRoot<Struct>().asReader();
  const std::optional<JobId> id = wire::idFromWireIfSet<JobId>(root.hasJobId(), root.getJobId());
  if (!id) return StoreError::corrupt("carries no job id");
  if (id->toHex() != key) return StoreError::corrupt("carries job id " + id->toHex());
  return StoredMessage<Struct>(kj::mv(message).value(), kj::mv(bytes));
}

const char* recordKindName(RecordFamily family) {
  switch (family) {
    case RecordFamily::kJobGraphs: return "JobGraph";
    case RecordFamily::kJobResults: return "JobResult";
    case RecordFamily::kJobProgress: return "JobProgress";
    case RecordFamily::kJobDetails: return "job detail";
    case RecordFamily::kJobProgressParts: return "JobProgressPart";
  }
  return "record";
}

// kCorrupt with the record named, for get().
StoreError corruptRecord(const char* family, const std::string& key, const StoreError& why) {
  return StoreError::corrupt(std::string(family) + " record " + key + " " + why.message +
                             "; it is left in place");
}

// One record of `family`, decoded: kNotFound when there is none, kCorrupt naming the job.
template <typename Struct>
kj::Promise<StoreResult<StoredMessage<Struct>>> readRecord(RecordStore& records,
                                                           RecordFamily family, JobId id) {
  std::string key = id.toHex();
  return records.get(family, key).then(
      [family, key](StoreResult<std::optional<std::string>>&& record)
          -> StoreResult<StoredMessage<Struct>> {
        if (!record.ok()) return record.error();
        if (!record.value()) {
          return StoreError::notFound(std::string("no ") + recordKindName(family) +
                                      " stored for job " + key);
        }
        auto decoded = decode<Struct>(key, kj::mv(*record.value()));
        if (!decoded.ok()) return corruptRecord(recordFamilyName(family), key, decoded.error());
        return kj::mv(decoded).value();
      });
}

void logSkipped(RecordFamily family, const CorruptRecord& record) {
  spdlog::warn("store: skipping corrupt {} record {}: {}", recordFamilyName(family), record.key,
               record.reason);
}

// Every record of `family` decoded, in key order; the ones that do not decode are reported (and
// logged), not fatal.
template <typename Struct>
struct Decoded {
  std::vector<StoredMessage<Struct>> messages;
  std::vector<CorruptRecord> corrupt;
};

template <typename Struct>
Decoded<Struct> decodeAll(RecordFamily family, std::vector<Record>&& records) {
  Decoded<Struct> all;
  all.messages.reserve(records.size());
  for (Record& record : records) {
    auto decoded = decode<Struct>(record.key, kj::mv(record.bytes));
    if (decoded.ok()) {
      all.messages.push_back(kj::mv(decoded).value());
    } else {
      all.corrupt.push_back({kj::mv(record.key), decoded.error().message});
      logSkipped(family, all.corrupt.back());
    }
  }
  return all;
}

bool isTerminal(wire::JobState state) {
  return state == wire::JobState::FINISHED || state == wire::JobState::FAILED ||
         state == wire::JobState::CANCELED;
}

// ---- JobGraphs ---------------------------------------------------------------------------

class PackedJobGraphStore final : public JobGraphStore {
 public:
  explicit PackedJobGraphStore(RecordStore& records) : records_(records) {}
  ~PackedJobGraphStore() noexcept override = default;

  kj::Promise<StoreResult<void>> put(wire::JobGraph::Reader graph) override {
    capnp::MallocMessageBuilder builder;
    StoreResult<void> copied = copyInto(builder, graph, "the JobGraph");
    if (!copied.ok()) return readyError(copied.error());
    auto root = builder.getRoot<wire::JobGraph>().asReader();
    const std::optional<JobId> id = wire::idFromWireIfSet<JobId>(root.hasJobId(), root.getJobId());
    if (!id) return readyError(StoreError::invalid("the JobGraph has no job id (jobId)"));
    StoreResult<std::string> packed = pack(
        builder, "the JobGraph of " + describeJob(*id, root.getName()), records_);
    if (!packed.ok()) return readyError(packed.error());
    return canceler_.wrap(
        records_.put(RecordFamily::kJobGraphs, id->toHex(), kj::mv(packed).value()));
  }

  kj::Promise<StoreResult<JobGraphMessage>> get(JobId id) override {
    return canceler_.wrap(readRecord<wire::JobGraph>(records_, RecordFamily::kJobGraphs, id));
  }

  kj::Promise<StoreResult<bool>> remove(JobId id) override {
    return canceler_.wrap(records_.remove(RecordFamily::kJobGraphs, id.toHex()));
  }

  kj::Promise<StoreResult<JobGraphIds>> listIds() override {
    return canceler_.wrap(records_.listKeys(RecordFamily::kJobGraphs)
                              .then([](StoreResult<std::vector<std::string>>&& keys)
                                        -> StoreResult<JobGraphIds> {
                                if (!keys.ok()) return keys.error();
                                JobGraphIds listing;
                                for (std::string& key : keys.value()) {
                                  if (auto id = JobId::fromHex(key)) {
                                    listing.ids.push_back(*id);
                                  } else {
                                    listing.corrupt.push_back(
                                        {kj::mv(key), kNotAJobId});
                                    logSkipped(RecordFamily::kJobGraphs, listing.corrupt.back());
                                  }
                                }
                                std::sort(listing.ids.begin(), listing.ids.end());
                                return listing;
                              }));
  }

  kj::Promise<StoreResult<RecoveredJobGraphs>> recoverAll() override {
    return canceler_.wrap(records_.readAll(RecordFamily::kJobGraphs)
                              .then([](StoreResult<std::vector<Record>>&& records)
                                        -> StoreResult<RecoveredJobGraphs> {
                                if (!records.ok()) return records.error();
                                auto decoded = decodeAll<wire::JobGraph>(
                                    RecordFamily::kJobGraphs, kj::mv(records).value());
                                return RecoveredJobGraphs{kj::mv(decoded.messages),
                                                          kj::mv(decoded.corrupt)};
                              }));
  }

 private:
  RecordStore& records_;
  kj::Canceler canceler_;
};

// ---- JobProgress -------------------------------------------------------------------------

// A progress part's key: "<job id>-<part>".
std::string partKey(const JobId& id, uint32_t part) {
  return id.toHex() + "-" + std::to_string(part);
}

// The job and part a part's key names; nullopt for any other key.
std::optional<std::pair<JobId, uint32_t>> parsePartKey(const std::string& key) {
  const size_t dash = key.find('-');
  if (dash == std::string::npos) return std::nullopt;
  const std::optional<JobId> id = JobId::fromHex(key.substr(0, dash));
  const std::string digits = key.substr(dash + 1);
  if (!id || digits.empty() || digits.size() > 9 || (digits[0] == '0' && digits.size() > 1) ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::make_pair(*id, static_cast<uint32_t>(std::stoul(digits)));
}

uint32_t partOf(uint32_t subtask) { return subtask / kProgressPartSubtasks; }

// Copies `from[index]` into `into[at]` as a reader sees it. Cap'n Proto may encode a list of
// structs more tightly, one primitive per element (what a hostile or corrupt record can hold),
// and reads each element as a struct whose fields beyond that primitive are their defaults;
// copying such an element as a struct would carry the primitive's bytes into the fields they
// overlap (a subtask index read as 0 copied as 12), so it is copied field by field.
void copySubtask(capnp::List<wire::SubtaskProgress>::Reader from, uint32_t index,
                 capnp::List<wire::SubtaskProgress>::Builder into, uint32_t at) {
  if (capnp::AnyList::Reader(from).getElementSize() == capnp::ElementSize::INLINE_COMPOSITE) {
    into.setWithCaveats(at, from[index]);
    return;
  }
  auto source = capnp::toDynamic(from[index]);
  auto target = capnp::toDynamic(into[at]);
  for (auto field : source.getSchema().getFields()) {
    if (source.has(field)) target.set(field, source.get(field));
  }
}

class PackedJobProgressStore final : public JobProgressStore {
 public:
  explicit PackedJobProgressStore(RecordStore& records) : records_(records) {}
  ~PackedJobProgressStore() noexcept override = default;

  kj::Promise<StoreResult<void>> put(wire::JobProgress::Reader progress) override {
    capnp::MallocMessageBuilder copy;
    StoreResult<void> copied = copyInto(copy, progress, "the job progress");
    if (!copied.ok()) return readyError(copied.error());
    auto root = copy.getRoot<wire::JobProgress>();
    const std::optional<JobId> id =
        wire::idFromWireIfSet<JobId>(root.asReader().hasJobId(), root.asReader().getJobId());
    if (!id) return readyError(StoreError::invalid("the job progress has no job id (jobId)"));
    const std::string what = "the progress record of " + describeJob(*id, "");

    // The subtasks by part. A job whose subtasks all fall in part 0 keeps them in the record
    // itself (one record, as before parts existed); otherwise every part is a record of its own
    // and the record holds none.
    auto subtasks = root.disownSubtasks();
    root.disownParts();
    std::map<uint32_t, std::vector<uint32_t>> byPart;  // Positions in `subtasks`.
    const auto all = subtasks.getReader();
    for (uint32_t i = 0; i < all.size(); ++i) byPart[partOf(all[i].getSubtask())].push_back(i);
    auto pick = [&all](const std::vector<uint32_t>& positions,
                       capnp::List<wire::SubtaskProgress>::Builder into) {
      for (uint32_t i = 0; i < positions.size(); ++i) copySubtask(all, positions[i], into, i);
    };

    capnp::MallocMessageBuilder header;
    header.setRoot(root.asReader());
    auto headerRoot = header.getRoot<wire::JobProgress>();
    const bool split = !byPart.empty() && byPart.rbegin()->first > 0;
    if (!split && !byPart.empty()) {
      pick(byPart.begin()->second,
           headerRoot.initSubtasks(static_cast<unsigned>(byPart.begin()->second.size())));
    }
    std::map<uint32_t, std::string> parts;  // Part -> its record.
    for (const auto& [part, positions] : byPart) {
      if (!split) break;
      capnp::MallocMessageBuilder builder;
      auto record = builder.initRoot<wire::JobProgressPart>();
      record.setJobId(headerRoot.asReader().getJobId());
      record.setPart(part);
      pick(positions, record.initSubtasks(static_cast<unsigned>(positions.size())));
      StoreResult<std::string> packed =
          pack(builder, what + " (part " + std::to_string(part) + ")", records_);
      if (!packed.ok()) return readyError(packed.error());
      parts.emplace(part, kj::mv(packed).value());
    }
    if (!parts.empty()) {
      auto listed = headerRoot.initParts(static_cast<unsigned>(parts.size()));
      uint32_t i = 0;
      for (const auto& entry : parts) listed.set(i++, entry.first);
    }
    StoreResult<std::string> packed = pack(header, what, records_);
    if (!packed.ok()) return readyError(packed.error());

    // The record, the parts that changed, and the removal of parts it no longer has.
    std::vector<RecordWrite> writes;
    writes.push_back(RecordWrite{RecordFamily::kJobProgress, id->toHex(), kj::mv(packed).value()});
    auto known = known_.find(*id);
    for (const auto& [part, bytes] : parts) {
      if (known != known_.end()) {
        auto stored = known->second.stored.find(part);
        if (stored != known->second.stored.end() && stored->second == bytes) continue;
      }
      writes.push_back(RecordWrite{RecordFamily::kJobProgressParts, partKey(*id, part), bytes});
    }
    if (known != known_.end()) {
      for (uint32_t part : known->second.present) {
        if (parts.count(part) == 0) {
          writes.push_back(
              RecordWrite{RecordFamily::kJobProgressParts, partKey(*id, part), std::nullopt});
        }
      }
    }
    // Known as present before the transaction goes: whether a failed one applied is unknown,
    // and a later removal must take these parts too. (commit() refuses a transaction over the
    // backend's limit, naming the record.)
    if (!parts.empty()) {
      KnownParts& entry = known_[*id];
      for (const auto& part : parts) entry.present.insert(part.first);
    }
    return canceler_.wrap(records_.commit(std::move(writes)))
        .then([this, id = *id, parts = std::move(parts)](StoreResult<void>&& written) mutable {
          auto known = known_.find(id);
          if (!written.ok()) {
            // What is stored now is unknown: the next put writes every part.
            if (known != known_.end()) known->second.stored.clear();
          } else if (parts.empty()) {
            if (known != known_.end()) known_.erase(known);
          } else {
            KnownParts& entry = known_[id];
            entry.present.clear();
            for (const auto& part : parts) entry.present.insert(part.first);
            entry.stored = std::move(parts);
          }
          return kj::mv(written);
        });
  }

  kj::Promise<StoreResult<bool>> remove(JobId id) override {
    auto known = known_.find(id);
    if (known == known_.end()) {
      return canceler_.wrap(records_.remove(RecordFamily::kJobProgress, id.toHex()));
    }
    std::vector<RecordWrite> writes{
        RecordWrite{RecordFamily::kJobProgress, id.toHex(), std::nullopt}};
    addPartRemovals(id, writes);
    return canceler_.wrap(records_.commit(std::move(writes)))
        .then([this, id](StoreResult<void>&& removed) -> StoreResult<bool> {
          if (!removed.ok()) return removed.error();
          forget(id);
          return true;
        });
  }

  // Adds to `writes` the removal of every part of job `id` this term wrote or read (for the
  // JobResultStore's cleanup transaction); forget() once that transaction applied.
  void addPartRemovals(JobId id, std::vector<RecordWrite>& writes) const {
    auto known = known_.find(id);
    if (known == known_.end()) return;
    for (uint32_t part : known->second.present) {
      writes.push_back(
          RecordWrite{RecordFamily::kJobProgressParts, partKey(id, part), std::nullopt});
    }
  }
  void forget(JobId id) { known_.erase(id); }

  StoreResult<void> admits(uint32_t subtasks) const override {
    // The largest transaction such a job writes: its record and every part at once, each
    // subtask with a live attempt whose fields do not pack away (no zero bytes), and a root
    // cause with kProgressTextAllowance bytes of text.
    auto fill = [](wire::Id128::Builder id) {
      id.setHi(~uint64_t{0});
      id.setLo(~uint64_t{0});
    };
    auto fillSubtasks = [&fill](capnp::List<wire::SubtaskProgress>::Builder list) {
      for (uint32_t i = 0; i < list.size(); ++i) {
        list[i].setSubtask(~uint32_t{0});
        fill(list[i].initAttemptId());
        list[i].setAttemptNumber(~uint32_t{0});
        list[i].setState(wire::ExecutionState::FAILED);
        fill(list[i].initResourceId());    // A live attempt's worker and slot.
        fill(list[i].initAllocationId());
      }
    };
    const uint32_t partCount = subtasks <= kProgressPartSubtasks
                                   ? 0
                                   : (subtasks + kProgressPartSubtasks - 1) / kProgressPartSubtasks;
    capnp::MallocMessageBuilder builder;
    auto progress = builder.initRoot<wire::JobProgress>();
    fill(progress.initJobId());
    progress.setEpoch(~uint64_t{0});
    progress.setWrittenAtMs(INT64_MAX);
    progress.setRestarts(~uint32_t{0});
    progress.setStartedAtMs(INT64_MAX);
    progress.setRestartDelayMs(INT64_MAX);
    progress.setEnded(wire::JobState::FAILED);
    auto failure = progress.initFailure();
    failure.setMessage(std::string(kProgressTextAllowance / 2, 'x'));
    failure.setVertexName(std::string(kProgressTextAllowance / 2, 'x'));
    failure.setSubtaskIndex(~uint32_t{0});
    fill(failure.initAttemptId());
    failure.setExitCode(-1);
    failure.setAtMs(INT64_MAX);
    if (partCount == 0) fillSubtasks(progress.initSubtasks(subtasks));
    auto listed = progress.initParts(partCount);
    for (uint32_t i = 0; i < partCount; ++i) listed.set(i, ~uint32_t{0});
    const std::string key(32, 'f');  // A job id's 32 hex digits.
    StoreResult<std::string> packed = pack(builder, "the progress record", records_);
    size_t total = 0;
    if (packed.ok()) {
      total = transactionBytes(recordName(RecordFamily::kJobProgress, key).size(),
                               packed.value().size());
      if (partCount > 0) {
        capnp::MallocMessageBuilder partBuilder;
        auto part = partBuilder.initRoot<wire::JobProgressPart>();
        fill(part.initJobId());
        part.setPart(~uint32_t{0});
        fillSubtasks(part.initSubtasks(kProgressPartSubtasks));
        StoreResult<std::string> one = pack(partBuilder, "a progress part", records_);
        if (one.ok()) {
          const std::string name =
              recordName(RecordFamily::kJobProgressParts, key + "-" + std::to_string(partCount));
          total += partCount * transactionBytes(name.size(), one.value().size());
        } else {
          packed = one.error();
        }
      }
    }
    if (packed.ok() && total <= records_.maxRecordSize()) return StoreResult<void>();
    const size_t size = packed.ok() ? total : packed.error().sizeBytes;
    StoreError error = StoreError::tooLarge(
        "a job of " + std::to_string(subtasks) +
        " subtasks (the sum of its vertices' parallelism) keeps a progress record of up to " +
        (size > 0 ? std::to_string(size) + " bytes" : std::string("more")) +
        ", over the store's limit of " + std::to_string(records_.maxRecordSize()) + " bytes (" +
        records_.maxRecordSizeOption() + "): lower the parallelism, or raise the limit");
    error.sizeBytes = size;
    error.limitBytes = records_.maxRecordSize();
    return error;
  }

  kj::Promise<StoreResult<RecoveredJobProgress>> recoverAll() override {
    using Recovered = StoreResult<RecoveredJobProgress>;
    return canceler_.wrap(
        records_.readAll(RecordFamily::kJobProgress)
            .then([this](StoreResult<std::vector<Record>>&& records) -> kj::Promise<Recovered> {
              if (!records.ok()) return Recovered(records.error());
              return records_.readAll(RecordFamily::kJobProgressParts)
                  .then([this, records = kj::mv(records).value()](
                            StoreResult<std::vector<Record>>&& parts) mutable -> Recovered {
                    if (!parts.ok()) return parts.error();
                    return assemble(kj::mv(records), kj::mv(parts).value());
                  });
            }));
  }

 private:
  // What this term knows of a large job's parts.
  struct KnownParts {
    std::map<uint32_t, std::string> stored;  // As last written or read, when known.
    std::set<uint32_t> present;              // Every part that may exist in the store.
  };

  // The records read at recovery with their parts merged back; what this term knows of every
  // job's parts starts from what was read.
  RecoveredJobProgress assemble(std::vector<Record>&& records, std::vector<Record>&& partRecords) {
    RecoveredJobProgress recovered;
    known_.clear();
    std::map<JobId, std::map<uint32_t, std::string>> found;
    for (Record& record : partRecords) {
      const auto named = parsePartKey(record.key);
      if (!named) {
        recovered.corrupt.push_back(
            {record.key, "is not a progress part's key (<job id>-<part number>)"});
        logSkipped(RecordFamily::kJobProgressParts, recovered.corrupt.back());
        continue;
      }
      known_[named->first].present.insert(named->second);
      found[named->first][named->second] = std::move(record.bytes);
    }
    auto decoded = decodeAll<wire::JobProgress>(RecordFamily::kJobProgress, kj::mv(records));
    std::set<JobId> withRecord;
    for (CorruptRecord& corrupt : decoded.corrupt) {
      if (auto id = JobId::fromHex(corrupt.key)) withRecord.insert(*id);
      recovered.corrupt.push_back(std::move(corrupt));
    }
    for (auto& message : decoded.messages) {
      const JobId id = wire::idFromWire<JobId>(message.get().getJobId());
      withRecord.insert(id);
      if (message.get().getParts().size() == 0) {
        recovered.records.push_back(kj::mv(message));
        continue;
      }
      auto merged = merge(id, message, found[id]);
      if (merged.ok()) {
        recovered.records.push_back(kj::mv(merged).value());
      } else {
        recovered.corrupt.push_back({id.toHex(), merged.error().message});
        logSkipped(RecordFamily::kJobProgress, recovered.corrupt.back());
      }
    }
    for (const auto& [id, parts] : found) {
      if (withRecord.count(id) > 0) continue;
      recovered.corrupt.push_back(
          {id.toHex(),
           "has " + std::to_string(parts.size()) + " part record" + (parts.size() == 1 ? "" : "s") +
               " (" +
               recordName(RecordFamily::kJobProgressParts, partKey(id, parts.begin()->first)) +
               (parts.size() == 1 ? "" : ", …") + ") but no progress record"});
      logSkipped(RecordFamily::kJobProgress, recovered.corrupt.back());
    }
    std::sort(recovered.corrupt.begin(), recovered.corrupt.end(),
              [](const CorruptRecord& a, const CorruptRecord& b) { return a.key < b.key; });
    return recovered;
  }

  // `header` with the parts it lists merged back into its subtasks; kCorrupt naming what does
  // not fit. Keeps the parts read as this term's knowledge of what is stored.
  StoreResult<JobProgressMessage> merge(const JobId& id, const JobProgressMessage& header,
                                        std::map<uint32_t, std::string>& found) {
    const auto record = header.get();
    if (record.getSubtasks().size() > 0) {
      return StoreError::corrupt("holds subtasks in the record and lists parts too (a record "
                                 "with parts holds none)");
    }
    std::vector<kj::Own<capnp::MallocMessageBuilder>> parts;
    uint32_t count = 0;
    std::optional<uint32_t> previous;
    for (uint32_t part : record.getParts()) {
      const std::string name = recordName(RecordFamily::kJobProgressParts, partKey(id, part));
      if (previous && part <= *previous) {
        return StoreError::corrupt("lists part " + name + " twice or out of order (parts are "
                                   "listed once each, ascending)");
      }
      previous = part;
      auto bytes = found.find(part);
      if (bytes == found.end()) {
        return StoreError::corrupt("lists part " + name + ", which is missing");
      }
      auto decoded = decodeMessage<wire::JobProgressPart>(bytes->second);
      if (!decoded.ok()) {
        return StoreError::corrupt("has a part " + name + " that " + decoded.error().message);
      }
      const auto partRoot = decoded.value()->getRoot<wire::JobProgressPart>().asReader();
      const std::optional<JobId> partJob =
          wire::idFromWireIfSet<JobId>(partRoot.hasJobId(), partRoot.getJobId());
      if (!partJob) return StoreError::corrupt("has a part " + name + " that carries no job id");
      if (*partJob != id) {
        return StoreError::corrupt("has a part " + name + " that carries job id " +
                                   partJob->toHex());
      }
      if (partRoot.getPart() != part) {
        return StoreError::corrupt("has a part " + name + " that carries part number " +
                                   std::to_string(partRoot.getPart()));
      }
      std::optional<uint32_t> previousSubtask;  // Ascending, once each: at most 32 of them.
      for (auto subtask : partRoot.getSubtasks()) {
        const uint32_t index = subtask.getSubtask();
        if (partOf(index) != part) {
          return StoreError::corrupt("has a part " + name + " holding subtask " +
                                     std::to_string(index) + ", outside its range");
        }
        if (previousSubtask && index <= *previousSubtask) {
          return StoreError::corrupt("has a part " + name + " holding subtask " +
                                     std::to_string(index) + " twice or out of order");
        }
        previousSubtask = index;
      }
      count += partRoot.getSubtasks().size();
      parts.push_back(kj::mv(decoded).value());
    }
    auto message = kj::heap<capnp::MallocMessageBuilder>();
    message->setRoot(record);
    auto root = message->getRoot<wire::JobProgress>();
    root.disownParts();
    auto subtasks = root.initSubtasks(count);
    uint32_t offset = 0;
    KnownParts& known = known_[id];
    for (auto& part : parts) {
      const auto partRoot = part->getRoot<wire::JobProgressPart>().asReader();
      const auto list = partRoot.getSubtasks();
      for (uint32_t i = 0; i < list.size(); ++i) copySubtask(list, i, subtasks, offset++);
      known.stored[partRoot.getPart()] = std::move(found[partRoot.getPart()]);
    }
    kj::VectorOutputStream output;
    capnp::writePackedMessage(output, *message);
    const auto bytes = output.getArray();
    return JobProgressMessage(
        kj::mv(message), std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  }

  RecordStore& records_;
  std::map<JobId, KnownParts> known_;  // Only jobs with parts.
  kj::Canceler canceler_;
};

// ---- JobResults --------------------------------------------------------------------------

// Newest first: by endedAtMs, then job id.
void sortNewestFirst(std::vector<JobResultMessage>& results) {
  std::sort(results.begin(), results.end(),
            [](const JobResultMessage& a, const JobResultMessage& b) {
              const int64_t aEnded = a.get().getEndedAtMs();
              const int64_t bEnded = b.get().getEndedAtMs();
              if (aEnded != bEnded) return aEnded > bEnded;
              return wire::idFromWire<JobId>(a.get().getJobId()) >
                     wire::idFromWire<JobId>(b.get().getJobId());
            });
}

class PackedJobResultStore final : public JobResultStore {
 public:
  PackedJobResultStore(RecordStore& records, PackedJobProgressStore& progress, size_t retain,
                       size_t detailMaxBytes)
      : records_(records), progress_(progress), retain_(retain), detailMaxBytes_(detailMaxBytes) {}
  ~PackedJobResultStore() noexcept override = default;

  kj::Promise<StoreResult<void>> createDirty(wire::JobResult::Reader result) override {
    capnp::MallocMessageBuilder builder;
    StoreResult<void> copied = copyInto(builder, result, "the JobResult");
    if (!copied.ok()) return readyError(copied.error());
    auto root = builder.getRoot<wire::JobResult>();
    const auto view = root.asReader();
    const std::optional<JobId> id = wire::idFromWireIfSet<JobId>(view.hasJobId(), view.getJobId());
    if (!id) return readyError(StoreError::invalid("the JobResult has no job id (jobId)"));
    if (!isTerminal(view.getState())) {
      return readyError(StoreError::invalid(
          "the JobResult of job " + id->toHex() + " has state " + wire::enumName(view.getState()) +
          ", which is not terminal (state must be finished, failed or canceled)"));
    }
    root.setClean(false);
    StoreResult<std::string> packed =
        pack(builder, "the JobResult of " + describeJob(*id, root.getJobName()),
             records_);
    if (!packed.ok()) return readyError(packed.error());
    std::string key = id->toHex();
    // A dirty result is never pruned: out of the clean index before the write, so a prune that
    // starts meanwhile cannot pick it, and again after (an index loaded meanwhile).
    forgetClean(key);
    return canceler_.wrap(
        trackWrite(records_.put(RecordFamily::kJobResults, key, kj::mv(packed).value()))
            .then([this, key](StoreResult<void>&& written) -> kj::Promise<StoreResult<void>> {
              if (!written.ok()) return kj::mv(written);
              // Never starts a load of the index: a load in flight is waited for (its
              // snapshot may predate this write), a failed one is retried by the next prune.
              KJ_IF_MAYBE (loading, loading_) {
                return loading->addBranch().then([this, key](StoreResult<bool>&&) {
                  forgetClean(key);
                  return StoreResult<void>();
                });
              }
              forgetClean(key);
              return StoreResult<void>();
            }));
  }

  kj::Promise<StoreResult<void>> markClean(JobId id) override {
    std::string key = id.toHex();
    return canceler_.wrap(
        readRecord<wire::JobResult>(records_, RecordFamily::kJobResults, id)
            .then([this, key](StoreResult<JobResultMessage>&& decoded)
                      -> kj::Promise<StoreResult<void>> {
              if (!decoded.ok()) return readyError(decoded.error());
              const int64_t endedAtMs = decoded.value().get().getEndedAtMs();
              if (decoded.value().get().getClean()) {
                return applyRetention(key, endedAtMs);
              }
              capnp::MallocMessageBuilder builder;
              builder.setRoot(decoded.value().get());
              builder.getRoot<wire::JobResult>().setClean(true);
              StoreResult<std::string> packed =
                  pack(builder, "the JobResult of job " + key, records_);
              if (!packed.ok()) return readyError(packed.error());
              return trackWrite(
                         records_.put(RecordFamily::kJobResults, key, kj::mv(packed).value()))
                  .then([this, key, endedAtMs](
                            StoreResult<void>&& written) -> kj::Promise<StoreResult<void>> {
                    if (!written.ok()) return kj::mv(written);
                    return applyRetention(key, endedAtMs);
                  });
            }));
  }

  kj::Promise<StoreResult<JobResultMessage>> get(JobId id) override {
    return canceler_.wrap(readRecord<wire::JobResult>(records_, RecordFamily::kJobResults, id));
  }

  kj::Promise<StoreResult<void>> putDetail(wire::JobStatus::Reader detail) override {
    std::optional<JobId> id;
    StoreResult<std::string> packed = packDetail(detail, id);
    if (!packed.ok()) return readyError(packed.error());
    return canceler_.wrap(
        records_.put(RecordFamily::kJobDetails, id->toHex(), kj::mv(packed).value()));
  }

  kj::Promise<StoreResult<std::string>> cleanUp(
      wire::JobResult::Reader result, kj::Maybe<wire::JobStatus::Reader> detail) override {
    using Cleaned = StoreResult<std::string>;
    const std::optional<JobId> id =
        wire::idFromWireIfSet<JobId>(result.hasJobId(), result.getJobId());
    if (!id) return Cleaned(StoreError::invalid("the JobResult has no job id (jobId)"));
    std::string key = id->toHex();
    std::vector<RecordWrite> writes;
    writes.push_back(RecordWrite{RecordFamily::kJobGraphs, key, std::nullopt});
    writes.push_back(RecordWrite{RecordFamily::kJobProgress, key, std::nullopt});
    progress_.addPartRemovals(*id, writes);
    std::string detailLeftOut;
    KJ_IF_MAYBE (given, detail) {
      std::optional<JobId> detailId;
      StoreResult<std::string> packed = packDetail(*given, detailId);
      if (packed.ok() && detailId != id) {
        packed = StoreError::invalid("the detail given with the cleanup of job " + key +
                                     " is another job's");
      }
      if (packed.ok()) {
        writes.push_back(RecordWrite{RecordFamily::kJobDetails, key, kj::mv(packed).value()});
      } else {
        detailLeftOut = packed.error().message;
      }
    }
    const bool markClean = !result.getClean();
    if (markClean) {
      capnp::MallocMessageBuilder builder;
      StoreResult<void> copied = copyInto(builder, result, "the JobResult");
      if (!copied.ok()) return Cleaned(copied.error());
      builder.getRoot<wire::JobResult>().setClean(true);
      StoreResult<std::string> packed =
          pack(builder, "the JobResult of " + describeJob(*id, result.getJobName()), records_);
      if (!packed.ok()) return Cleaned(packed.error());
      writes.push_back(RecordWrite{RecordFamily::kJobResults, key, kj::mv(packed).value()});
    }
    const int64_t endedAtMs = result.getEndedAtMs();
    kj::Promise<StoreResult<void>> written = records_.commit(std::move(writes));
    if (markClean) written = trackWrite(kj::mv(written));
    return canceler_.wrap(written.then(
        [this, id = *id, key, endedAtMs, markClean, detailLeftOut = std::move(detailLeftOut)](
            StoreResult<void>&& written) mutable -> kj::Promise<Cleaned> {
          if (!written.ok()) return Cleaned(written.error());
          progress_.forget(id);
          if (!markClean) return Cleaned(std::move(detailLeftOut));
          return applyRetention(key, endedAtMs)
              .then([detailLeftOut = std::move(detailLeftOut)](
                        StoreResult<void>&& retained) mutable -> Cleaned {
                if (!retained.ok()) return Cleaned(retained.error());
                return Cleaned(std::move(detailLeftOut));
              });
        }));
  }

  kj::Promise<StoreResult<JobDetailMessage>> getDetail(JobId id) override {
    return canceler_.wrap(readRecord<wire::JobStatus>(records_, RecordFamily::kJobDetails, id));
  }

  kj::Promise<StoreResult<JobResults>> listDirty() override {
    return canceler_.wrap(readResults().then([](StoreResult<JobResults>&& all) -> StoreResult<JobResults> {
      if (!all.ok()) return all;
      JobResults dirty;
      dirty.corrupt = kj::mv(all.value().corrupt);
      for (JobResultMessage& result : all.value().results) {
        if (!result.get().getClean()) dirty.results.push_back(kj::mv(result));
      }
      return dirty;
    }));
  }

  kj::Promise<StoreResult<JobResults>> listAll() override {
    return canceler_.wrap(
        readResults().then([retain = retain_](StoreResult<JobResults>&& all) -> StoreResult<JobResults> {
          if (!all.ok()) return all;
          JobResults kept;
          kept.corrupt = kj::mv(all.value().corrupt);
          size_t clean = 0;
          for (JobResultMessage& result : all.value().results) {
            if (result.get().getClean() && clean++ >= retain) continue;
            kept.results.push_back(kj::mv(result));
          }
          return kept;
        }));
  }

 private:
  // The detail as putDetail() stores it (without its rows when over the cap); `id` is set to
  // its job.
  StoreResult<std::string> packDetail(wire::JobStatus::Reader detail, std::optional<JobId>& id) {
    capnp::MallocMessageBuilder builder;
    StoreResult<void> copied = copyInto(builder, detail, "the job's detail");
    if (!copied.ok()) return copied.error();
    auto root = builder.getRoot<wire::JobStatus>();
    id = wire::idFromWireIfSet<JobId>(root.asReader().hasJobId(), root.asReader().getJobId());
    if (!id) return StoreError::invalid("the job's detail has no job id (jobId)");
    const std::string what = "the detail of " + describeJob(*id, root.getName());
    kj::VectorOutputStream output;
    capnp::writePackedMessage(output, builder);
    if (output.getArray().size() > detailMaxBytes_) {
      // Over the cap: the rows go, what sums them up stays, and the reader learns why.
      const std::string why = "the detail's " + std::to_string(output.getArray().size()) +
                              " bytes are over store.job-details.max-size (" +
                              std::to_string(detailMaxBytes_) + " bytes)";
      // Built anew, field by field: no space of the rows is left in the record.
      const auto full = root.asReader();
      capnp::MallocMessageBuilder trimmed;
      auto kept = trimmed.initRoot<wire::JobStatus>();
      kept.setJobId(full.getJobId());
      kept.setName(full.getName());
      kept.setState(full.getState());
      kept.setSubmittedAtMs(full.getSubmittedAtMs());
      kept.setStateChangedAtMs(full.getStateChangedAtMs());
      kept.setEndedAtMs(full.getEndedAtMs());
      kept.setRestarts(full.getRestarts());
      kept.setTasks(full.getTasks());
      if (full.hasFailure()) kept.setFailure(full.getFailure());
      auto vertices = kept.initVertices(full.getVertices().size());
      for (uint32_t i = 0; i < full.getVertices().size(); ++i) {
        vertices[i].setName(full.getVertices()[i].getName());
        vertices[i].setParallelism(full.getVertices()[i].getParallelism());
        vertices[i].setTasks(full.getVertices()[i].getTasks());
      }
      kept.setSubtasksOmitted("subtask rows not kept: " + why);
      StoreResult<std::string> packed = pack(trimmed, what, records_);
      if (packed.ok() && packed.value().size() > detailMaxBytes_) {
        return StoreError::tooLarge(what + " is not kept: without its subtask rows it is still "
                                    "over store.job-details.max-size (" +
                                    std::to_string(detailMaxBytes_) + " bytes)");
      }
      return packed;
    }
    return pack(builder, what, records_);
  }

  // Counts a result write while it runs (see readResults()). A cancelled write stays counted,
  // which only turns the shortcut there off.
  kj::Promise<StoreResult<void>> trackWrite(kj::Promise<StoreResult<void>> write) {
    ++writesIssued_;
    ++writesRunning_;
    return write.then(
        [this](StoreResult<void>&& written) {
          --writesRunning_;
          return kj::mv(written);
        },
        [this](kj::Exception&& exception) -> StoreResult<void> {
          --writesRunning_;
          kj::throwFatalException(kj::mv(exception));
        });
  }

  // Every result, newest first, corrupt ones reported and skipped. Also fills the clean index
  // when it is not loaded yet and no write ran during the read, nor was still running when it
  // started (its record could land after the read saw the old one): a recovery's listing then
  // spares the first markClean a second full read.
  kj::Promise<StoreResult<JobResults>> readResults() {
    const bool quiet = writesRunning_ == 0;
    return records_.readAll(RecordFamily::kJobResults)
        .then([this, quiet, writesBefore = writesIssued_](
                  StoreResult<std::vector<Record>>&& records) -> StoreResult<JobResults> {
          if (!records.ok()) return records.error();
          auto decoded =
              decodeAll<wire::JobResult>(RecordFamily::kJobResults, kj::mv(records).value());
          if (!index_ && quiet && writesBefore == writesIssued_) indexClean(decoded.messages);
          JobResults all{kj::mv(decoded.messages), kj::mv(decoded.corrupt)};
          sortNewestFirst(all.results);
          return all;
        });
  }

  // Builds the clean index from every result. Corrupt records are neither counted nor pruned:
  // an operator decides.
  void indexClean(const std::vector<JobResultMessage>& results) {
    index_.emplace();
    for (const JobResultMessage& result : results) {
      if (result.get().getClean()) {
        addClean(wire::idFromWire<JobId>(result.get().getJobId()).toHex(),
                 result.get().getEndedAtMs());
      }
    }
  }

  // Counts `key` as clean and prunes beyond `retain`. The result is marked clean whatever
  // happens here: a failure to load the index only puts the pruning off to the next call.
  kj::Promise<StoreResult<void>> applyRetention(const std::string& key, int64_t endedAtMs) {
    return withIndex([this, key, endedAtMs]() { return rememberClean(key, endedAtMs); })
        .then([key](StoreResult<void>&& pruned) {
          if (!pruned.ok()) {
            spdlog::warn("store: job result {} is clean; pruning old results is put off: {}", key,
                         pruned.error().message);
          }
          return StoreResult<void>();
        });
  }

  // Runs `step` once the clean index is loaded (the first call of a term reads every result;
  // the store is the term's only writer, so the index stays true afterwards). A load that
  // failed is retried by the next call.
  template <typename Step>
  kj::Promise<StoreResult<void>> withIndex(Step step) {
    if (index_) return step();
    if (loading_ == nullptr) {
      ++loadGeneration_;
      loading_ = records_.readAll(RecordFamily::kJobResults)
                     .then([this](StoreResult<std::vector<Record>>&& records) -> StoreResult<bool> {
                       if (!records.ok()) return records.error();
                       if (!index_) {
                         indexClean(decodeAll<wire::JobResult>(RecordFamily::kJobResults,
                                                               kj::mv(records).value())
                                        .messages);
                       }
                       return true;
                     })
                     .fork();
    }
    KJ_IF_MAYBE (loading, loading_) {
      return loading->addBranch().then(
          [this, step = kj::mv(step), generation = loadGeneration_](
              StoreResult<bool>&& loaded) mutable -> kj::Promise<StoreResult<void>> {
            if (!loaded.ok()) {
              // Let the next call try again (unless it already did).
              if (generation == loadGeneration_) loading_ = nullptr;
              return readyError(loaded.error());
            }
            return step();
          });
    }
    KJ_UNREACHABLE;
  }

  void addClean(const std::string& key, int64_t endedAtMs) {
    forgetClean(key);
    index_->byKey.emplace(key, endedAtMs);
    index_->oldestFirst.emplace(endedAtMs, key);
  }

  void forgetClean(const std::string& key) {
    if (!index_) return;
    auto found = index_->byKey.find(key);
    if (found == index_->byKey.end()) return;
    index_->oldestFirst.erase({found->second, key});
    index_->byKey.erase(found);
  }

  // Records `key` as clean, then removes the oldest clean results beyond `retain`. A failed
  // removal is logged and retried by the next prune (the record stays counted).
  kj::Promise<StoreResult<void>> rememberClean(const std::string& key, int64_t endedAtMs) {
    addClean(key, endedAtMs);
    std::vector<std::string> expired;
    auto oldest = index_->oldestFirst.begin();
    for (size_t excess = index_->byKey.size() > retain_ ? index_->byKey.size() - retain_ : 0;
         excess > 0; --excess, ++oldest) {
      expired.push_back(oldest->second);
    }
    kj::Vector<kj::Promise<void>> removals;
    for (std::string& expiredKey : expired) {
      removals.add(records_.remove(RecordFamily::kJobResults, expiredKey)
                       .then([this, expiredKey](StoreResult<bool>&& removed) -> kj::Promise<void> {
                         if (removed.ok()) {
                           forgetClean(expiredKey);
                           // Its detail goes with it (a failure leaves an orphan that nothing
                           // reads: no result names it).
                           return records_.remove(RecordFamily::kJobDetails, expiredKey)
                               .then([expiredKey](StoreResult<bool>&& detail) {
                                 if (!detail.ok()) {
                                   spdlog::warn("store: could not remove the detail of pruned "
                                                "job result {}: {}",
                                                expiredKey, detail.error().message);
                                 }
                               });
                         }
                         spdlog::warn("store: could not prune job result {}: {}", expiredKey,
                                      removed.error().message);
                         return kj::READY_NOW;
                       }));
    }
    return kj::joinPromises(removals.releaseAsArray()).then([]() { return StoreResult<void>(); });
  }

  struct CleanIndex {
    std::map<std::string, int64_t> byKey;                  // key -> endedAtMs
    std::set<std::pair<int64_t, std::string>> oldestFirst;  // (endedAtMs, key)
  };

  RecordStore& records_;
  PackedJobProgressStore& progress_;
  const size_t retain_;
  const size_t detailMaxBytes_;
  std::optional<CleanIndex> index_;
  kj::Maybe<kj::ForkedPromise<StoreResult<bool>>> loading_;  // Reset from branches only.
  uint64_t loadGeneration_ = 0;
  uint64_t writesIssued_ = 0;   // createDirty/markClean writes started; see readResults().
  uint64_t writesRunning_ = 0;  // Of those, not finished yet.
  kj::Canceler canceler_;
};

class PackedLeaderStores final : public LeaderStores {
 public:
  PackedLeaderStores(kj::Own<RecordStore> records, size_t retain, size_t detailMaxBytes)
      : records_(kj::mv(records)),
        jobGraphs_(*records_),
        jobProgress_(*records_),
        jobResults_(*records_, jobProgress_, retain, detailMaxBytes) {}
  ~PackedLeaderStores() noexcept override = default;

  JobGraphStore& jobGraphs() override { return jobGraphs_; }
  JobResultStore& jobResults() override { return jobResults_; }
  JobProgressStore& jobProgress() override { return jobProgress_; }

 private:
  kj::Own<RecordStore> records_;  // Declared first: destroyed after the stores above it.
  PackedJobGraphStore jobGraphs_;
  PackedJobProgressStore jobProgress_;  // Before jobResults_, whose cleanups remove its parts.
  PackedJobResultStore jobResults_;
};

}  // namespace

kj::Own<LeaderStores> makeLeaderStores(kj::Own<RecordStore> records, size_t retain,
                                       size_t detailMaxBytes) {
  return kj::heap<PackedLeaderStores>(kj::mv(records), retain, detailMaxBytes);
}

}  // namespace regent::store
