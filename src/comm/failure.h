// An operation's failure held as a value, so that every thread that waits on the operation
// throws a copy of its own. Handing one exception object to several threads through
// std::exception_ptr makes whichever thread drops the last reference free it, and that
// reference count lives inside libstdc++, where ThreadSanitizer cannot see it: the waiter's
// reads and the engine thread's free then look like a race.
#pragma once

#include <exception>
#include <optional>

#include "hoop/error.h"

namespace hoop::detail {

class Failure {
 public:
  Failure() = default;
  explicit Failure(const Error& e) : error_(e) {}

  // Takes the value of a caught exception; call it on the thread that caught it. Exceptions
  // other than hoop::Error (a bug, std::bad_alloc) are kept as they are.
  static Failure of(const std::exception_ptr& e) {
    Failure f;
    if (!e) return f;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      f.error_ = err;
    } catch (...) {
      f.other_ = e;
    }
    return f;
  }

  explicit operator bool() const { return error_.has_value() || other_ != nullptr; }

  [[noreturn]] void raise() const {
    if (error_) throw Error(*error_);
    std::rethrow_exception(other_);
  }

 private:
  std::optional<Error> error_;
  std::exception_ptr other_;
};

}  // namespace hoop::detail
