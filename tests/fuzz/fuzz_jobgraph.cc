// Fuzz target: the JobGraph file format (YAML, JSON, detected) and the JobGraph rules, as
// `regentctl jobs submit` and the Dispatcher's submitJob apply them; and the rules alone over a
// raw Cap'n Proto message, as submitJob receives one from the network.
//
// Input: one selector byte, then the document. Selector % 4: 0 YAML, 1 JSON, 2 detect, 3 the rest
// is an unpacked Cap'n Proto message (segment table + segments) whose root is read as a JobGraph.
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "jobgraph/job_graph_spec.h"
#include "jobgraph/job_graph_validation.h"
#include "rpc/schema/jobs.capnp.h"

namespace {

using regent::jobgraph::findJobGraphViolation;
using regent::jobgraph::JobGraphLimits;
using regent::jobgraph::JobGraphSpecFormat;

// The rules with regentctl's limits (no slot known) and with the Dispatcher's (a slot known).
void checkRules(regent::wire::JobGraph::Reader graph) {
  auto withoutSlot = findJobGraphViolation(graph, JobGraphLimits{});
  if (withoutSlot) (void)withoutSlot->describe();
  JobGraphLimits dispatcherLimits;
  dispatcherLimits.largestSlot =
      regent::jobgraph::SlotProfile{.cpuMillis = 4000, .memoryBytes = 8ull << 30};
  (void)findJobGraphViolation(graph, dispatcherLimits);
}

void fuzzDocument(std::string_view text, JobGraphSpecFormat format) {
  auto parsed = regent::jobgraph::parseJobGraphSpec(text, format);
  if (!parsed) {
    // Every refusal says what is wrong.
    if (parsed.error().message.empty()) std::abort();
    return;
  }
  checkRules(parsed.value()->getRoot<regent::wire::JobGraph>().asReader());
}

void fuzzMessage(const uint8_t* data, size_t size) {
  // The words must be aligned: copy into a word array (a trailing partial word is dropped).
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  if (words.size() > 0) std::memcpy(words.begin(), data, words.size() * sizeof(capnp::word));
  // Reading the segment table throws for a malformed one; the rules must not throw after that.
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 1 << 16;
  kj::Maybe<kj::Own<capnp::FlatArrayMessageReader>> reader;
  KJ_IF_MAYBE (failure, kj::runCatchingExceptions([&] {
                 reader = kj::heap<capnp::FlatArrayMessageReader>(words.asPtr(), options);
               })) {
    return;
  }
  KJ_IF_MAYBE (r, reader) {
    regent::wire::JobGraph::Reader graph;
    if (kj::runCatchingExceptions([&] { graph = (*r)->getRoot<regent::wire::JobGraph>(); }) !=
        nullptr) {
      return;
    }
    checkRules(graph);  // Documented never to throw, even on a malformed message.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0] % 4;
  ++data;
  --size;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  switch (selector) {
    case 0:
      fuzzDocument(text, JobGraphSpecFormat::kYaml);
      break;
    case 1:
      fuzzDocument(text, JobGraphSpecFormat::kJson);
      break;
    case 2:
      fuzzDocument(text, JobGraphSpecFormat::kDetect);
      break;
    default:
      fuzzMessage(data, size);
      break;
  }
  return 0;
}
