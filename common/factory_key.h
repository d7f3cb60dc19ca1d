// FactoryKey<T>: the first argument of a constructor that only T's own factory may call, so that
// the constructor can be public for kj::heap while nothing but T (its create(), open() or
// spawn(), returning Result<kj::Own<T>>) can build a T, and never a half-built one.
#pragma once

namespace regent {

template <typename T>
class FactoryKey final {
  friend T;
  FactoryKey() = default;
};

}  // namespace regent
