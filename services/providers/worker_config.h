// What the providers share about the workers they start: which worker ids are safe to use as a
// directory name, container name or label, and how a started worker's worker.yaml quotes values.
#pragma once

#include <string>

namespace regent::providers {

// Letters, digits, '.', '_', '-', at most 128 characters, never "." or "..": a worker id comes
// from a registration, which a worker, not the provider, wrote.
bool isSafeWorkerId(const std::string& id);

// `text` as a double-quoted YAML scalar (quotes, backslashes and newlines escaped).
std::string yamlQuoted(const std::string& text);

}  // namespace regent::providers
