#include "shared_allocator.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace hoop_torch {

namespace {

// The registered memory behind one allocation; torch frees it through the DataPtr's deleter.
void free_shared(void* ctx) { delete static_cast<hoop::SharedBuffer*>(ctx); }

class SharedAllocator final : public c10::Allocator {
 public:
  SharedAllocator(std::shared_ptr<hoop::Communicator> comm, size_t min_bytes, c10::Allocator* before)
      : comm_(std::move(comm)), min_bytes_(min_bytes), before_(before) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n == 0 || n < min_bytes_) return before_->allocate(n);
    std::shared_lock lk(mu_);
    if (!comm_) return before_->allocate(n);  // removed while this thread was on its way here
    hoop::SharedBuffer shared;
    try {
      shared = comm_->alloc(n);
    } catch (const std::exception& e) {
      // No shared mapping to be had (/dev/shm full, say): private memory, which collectives
      // copy as usual, rather than a failed allocation.
      TORCH_WARN_ONCE("hoop_torch: an allocation in shared memory failed, private memory instead: ", e.what());
      return before_->allocate(n);
    }
    auto* buf = new hoop::SharedBuffer(std::move(shared));
    return c10::DataPtr(buf->data(), buf, &free_shared, c10::Device(c10::DeviceType::CPU));
  }
  // Memory from here can only be freed through its DataPtr.
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  c10::Allocator* before() const { return before_; }
  // Once removed: lets the communicator go; late callers get the allocator from before.
  void retire() {
    std::unique_lock lk(mu_);
    comm_.reset();
  }

 private:
  mutable std::shared_mutex mu_;
  std::shared_ptr<hoop::Communicator> comm_;  // alive while allocations go through it
  size_t min_bytes_;
  c10::Allocator* before_;
};

// torch's allocator slots go by priority: a SetAllocator below the current priority is
// ignored. The helper installs and restores at the highest one, so both take effect.
constexpr uint8_t kPriority = 255;

std::mutex g_mu;
std::unique_ptr<SharedAllocator> g_installed;

}  // namespace

void install_shared_allocator(std::shared_ptr<hoop::Communicator> comm, size_t min_bytes) {
  std::lock_guard lk(g_mu);
  if (g_installed) throw std::runtime_error("hoop_torch: shared-memory allocations are already on");
  c10::Allocator* before = c10::GetAllocator(c10::DeviceType::CPU);
  g_installed = std::make_unique<SharedAllocator>(std::move(comm), min_bytes, before);
  c10::SetAllocator(c10::DeviceType::CPU, g_installed.get(), kPriority);
}

bool remove_shared_allocator() {
  std::lock_guard lk(g_mu);
  if (!g_installed) return false;
  c10::SetAllocator(c10::DeviceType::CPU, g_installed->before(), kPriority);
  // Kept (a few words each): a thread may have fetched it just before and be on its way in.
  g_installed->retire();
  static std::vector<std::unique_ptr<SharedAllocator>> retired;
  retired.push_back(std::move(g_installed));
  return true;
}

bool in_shared_allocation(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage().data_ptr().get_deleter() == &free_shared;
}

}  // namespace hoop_torch
