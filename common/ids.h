// Typed 128-bit identifiers (JobId, AllocationId, ResourceId, AttemptId, RegistrationId): random, printed as
// 32 lowercase hex digits, and distinct types so one cannot be passed for another.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace regent {

namespace detail {
void randomId128(uint64_t& hi, uint64_t& lo);
std::string formatId128(uint64_t hi, uint64_t lo);
bool parseId128(std::string_view text, uint64_t& hi, uint64_t& lo);
}  // namespace detail

template <typename Tag>
class Id128 final {
 public:
  constexpr Id128() = default;
  constexpr Id128(uint64_t hi, uint64_t lo) : hi_(hi), lo_(lo) {}

  // A fresh id from a per-thread generator seeded by the OS (and re-seeded in a forked child,
  // which would otherwise repeat its parent's ids).
  static Id128 random() {
    Id128 id;
    detail::randomId128(id.hi_, id.lo_);
    return id;
  }
  // Parses exactly 32 hex digits, either case; nothing else is accepted.
  static std::optional<Id128> fromHex(std::string_view text) {
    Id128 id;
    if (!detail::parseId128(text, id.hi_, id.lo_)) return std::nullopt;
    return id;
  }

  std::string toHex() const { return detail::formatId128(hi_, lo_); }
  uint64_t hi() const { return hi_; }
  uint64_t lo() const { return lo_; }
  bool isZero() const { return hi_ == 0 && lo_ == 0; }
  auto operator<=>(const Id128&) const = default;

 private:
  uint64_t hi_ = 0;
  uint64_t lo_ = 0;
};

using JobId = Id128<struct JobIdTag>;
using AllocationId = Id128<struct AllocationIdTag>;
using ResourceId = Id128<struct ResourceIdTag>;
using AttemptId = Id128<struct AttemptIdTag>;
using RegistrationId = Id128<struct RegistrationIdTag>;

}  // namespace regent
