// The one error model for expected failures: a [[nodiscard]] Result<T> that holds either a value
// or an Error marked retryable or fatal. Exceptions stay for logistical failures (disconnected,
// overloaded, bugs); expected outcomes (not leader, stale epoch, not found) are values.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace regent {

struct Error {
  enum class Kind { kFatal, kRetryable };

  std::string message;
  Kind kind = Kind::kFatal;

  static Error fatal(std::string message) { return Error{std::move(message), Kind::kFatal}; }
  static Error retryable(std::string message) { return Error{std::move(message), Kind::kRetryable}; }
  bool isRetryable() const { return kind == Kind::kRetryable; }
};

// A value or an error. `E` is the error type: Error for most of the code base; a layer whose
// callers branch on a finer code (the stores' StoreError) names its own, as an alias
// (`store::StoreResult<T>` = `Result<T, store::StoreError>`), so there is one result type and no
// conversion between result types at call sites.
template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}                // NOLINT: implicit by design
  Result(E error) : state_(std::move(error)) {}                // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // WARNING: value() and error() require ok() and !ok() respectively; checked by std::get.
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  const E& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, E> state_;
};

// Result of an operation with no value.
template <typename E>
class [[nodiscard]] Result<void, E> {
 public:
  Result() = default;
  Result(E error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const E& error() const { return error_; }

 private:
  E error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace regent
