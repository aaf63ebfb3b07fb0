#include "comm/work_state.h"
#include "core/errors.h"
#include "hoop/communicator.h"

namespace hoop {

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

namespace {
detail::WorkState& checked(const std::shared_ptr<detail::WorkState>& s) {
  if (!s) throw_error(ErrorCode::invalid_argument, "Work handle is empty (default-constructed)");
  return *s;
}
}  // namespace

bool Work::test() { return checked(state_).wait_for(std::chrono::nanoseconds(0)); }
void Work::wait() { checked(state_).wait(); }
bool Work::wait_for(std::chrono::milliseconds limit) { return checked(state_).wait_for(limit); }
uint64_t Work::seq() const { return checked(state_).seq(); }

RecvStatus Work::status() const {
  const auto [done, status] = checked(state_).status();
  if (!done) throw_error(ErrorCode::invalid_argument, "Work::status(): the operation is still running");
  if (!status) {
    throw_error(ErrorCode::invalid_argument,
                "Work::status(): the operation is not a receive that completed");
  }
  return *status;
}

}  // namespace hoop
