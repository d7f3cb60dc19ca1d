// Text syntax of typed option values: durations (500ms, 6s, 2m, 1h), sizes (64MiB, 1GiB) and
// the formatting back to the shortest exact text. Shared by the config loader and the docs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/time.h"

namespace regent {

// A whole non-negative number followed by ms, s, m or h ("500ms", "6s", "2m", "1h"); a bare
// "0" is allowed. Surrounding whitespace is ignored. On failure the error message starts
// with "expected ..." so callers can prefix it with what was being parsed.
Result<Duration> parseDuration(std::string_view text);

// A whole non-negative number of bytes, optionally followed by B, KiB, MiB, GiB or TiB
// ("64MiB", "1GiB", "4096"). Same error convention as parseDuration.
Result<uint64_t> parseSize(std::string_view text);

// The largest unit that divides the value exactly: 2m, 6s, 1500ms; zero is "0s".
std::string formatDuration(Duration duration);

// The largest binary unit that divides the value exactly: 1GiB, 1536KiB, 1000B; zero is "0B".
std::string formatSize(uint64_t bytes);

}  // namespace regent
