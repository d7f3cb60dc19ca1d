// The JobGraph file format (docs/jobgraph.md): a YAML or JSON document, as `regentctl jobs
// submit FILE` reads it, turned into the wire JobGraph (rpc/schema/jobs.capnp) it submits.
#pragma once

#include <capnp/message.h>
#include <kj/memory.h>

#include <string_view>

#include "common/result.h"

namespace regent::jobgraph {

enum class JobGraphSpecFormat {
  kYaml,
  kJson,    // strict JSON (RFC 8259): no comments, trailing commas or text after the object
  kDetect,  // JSON when the first character other than whitespace (and a BOM) is '{', else YAML
};

// kJson for a path ending in ".json", kYaml for ".yaml" or ".yml" (any letter case), kDetect for
// anything else (including "-" for standard input).
JobGraphSpecFormat jobGraphSpecFormatForPath(std::string_view path);

// Parses one JobGraph document into a fresh message whose root is a wire::JobGraph.
//
// Checks what the file format says: the shape, key names, value types, and the syntax of
// durations ("10s"), sizes ("512MiB") and CPU amounts (0.5, "500m"). It does not apply the
// JobGraph rules (non-empty names, acyclic, parallelism in range, ...): call validateJobGraph
// (job_graph_validation.h) on the result, as the Dispatcher does again on submitJob.
//
// Defaults: a missing job_id is a fresh random JobId (so submitting the same file twice without
// one makes two jobs); parallelism 1; no resources (0 CPU, 0 bytes: fits any slot); no restart
// strategy (the wire field stays null, which means none); submittedAtMs stays 0 (the Dispatcher
// sets it). A key whose value is null is the same as the key left out.
//
// On failure returns a fatal Error whose message starts with the key path and ends with the
// position when the parser knows it: "vertices[1].command.argvv: unknown key (expected one of
// argv, env, working_dir) (line 9, column 7)". Syntax errors read "YAML syntax error (line 3,
// column 5): ..." or "JSON syntax error (line 3, column 5): ...".
//
// Pure function of its input (apart from the random job id); safe on any thread.
Result<kj::Own<capnp::MallocMessageBuilder>> parseJobGraphSpec(std::string_view text,
                                                               JobGraphSpecFormat format);

}  // namespace regent::jobgraph
