// Generation, formatting and parsing of 128-bit ids.
#include "common/ids.h"

#include <unistd.h>

#include <random>

namespace regent::detail {

namespace {

std::mt19937_64 seededGenerator() {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(), device(), device()};
  return std::mt19937_64(seed);
}

}  // namespace

void randomId128(uint64_t& hi, uint64_t& lo) {
  thread_local std::mt19937_64 generator = seededGenerator();
  thread_local pid_t seededIn = ::getpid();
  if (seededIn != ::getpid()) {  // A forked child: do not repeat the parent's sequence.
    generator = seededGenerator();
    seededIn = ::getpid();
  }
  do {
    hi = generator();
    lo = generator();
  } while (hi == 0 && lo == 0);  // Zero means "no id" on the wire.
}

std::string formatId128(uint64_t hi, uint64_t lo) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(hi >> (4 * i)) & 0xf];
    out[31 - i] = kDigits[(lo >> (4 * i)) & 0xf];
  }
  return out;
}

bool parseId128(std::string_view text, uint64_t& hi, uint64_t& lo) {
  if (text.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = text[i];
    uint64_t digit;
    if (c >= '0' && c <= '9') digit = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') digit = static_cast<uint64_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = static_cast<uint64_t>(c - 'A' + 10);
    else return false;
    parts[i / 16] = (parts[i / 16] << 4) | digit;
  }
  hi = parts[0];
  lo = parts[1];
  return true;
}

}  // namespace regent::detail
