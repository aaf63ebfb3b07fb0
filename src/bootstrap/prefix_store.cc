// Keys scoped under "prefix/": one store shared by several communicators of one job.
#include "bootstrap/timed_store.h"
#include "core/errors.h"
#include "hoop/store.h"

namespace hoop {

namespace {

class PrefixStore final : public bootstrap::TimedStore {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix) + "/"),
        timed_base_(dynamic_cast<bootstrap::TimedStore*>(base_.get())) {
    timeout_ = base_->timeout();
  }

  void set(const std::string& key, const Bytes& value) override { base_->set(scoped(key), value); }

  // Stores of hoop's own take the timeout per call, so this store's timeout() applies; any
  // other store waits with its own timeout.
  Bytes get_within(const std::string& key, std::chrono::milliseconds limit) override {
    if (timed_base_) return timed_base_->get_within(scoped(key), limit);
    return base_->get(scoped(key));
  }

  void wait_within(const std::vector<std::string>& keys, std::chrono::milliseconds limit) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(scoped(k));
    if (timed_base_) return timed_base_->wait_within(full, limit);
    base_->wait(full);
  }

  bool parks_waits() const override { return timed_base_ && timed_base_->parks_waits(); }

  int64_t add(const std::string& key, int64_t delta) override {
    return base_->add(scoped(key), delta);
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return base_->compare_set(scoped(key), expected, desired);
  }
  bool check(const std::string& key) override { return base_->check(scoped(key)); }
  bool remove(const std::string& key) override { return base_->remove(scoped(key)); }

 private:
  std::string scoped(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<Store> base_;
  std::string prefix_;
  bootstrap::TimedStore* timed_base_;  // base_ when it is one of hoop's stores, else null
};

}  // namespace

std::shared_ptr<Store> prefix_store(std::shared_ptr<Store> base, const std::string& prefix) {
  HOOP_CHECK_ARG(base != nullptr, ErrorContext{.op = "store.prefix"},
                 "prefix_store('{}') of a null store", prefix);
  return std::make_shared<PrefixStore>(std::move(base), prefix);
}

}  // namespace hoop
