// hoop's rendezvous through torch's own store: the c10d::Store handed to the backend's creator
// (a PrefixStore over the TCPStore of init_process_group) seen as a hoop::Store.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "hoop/error.h"
#include "hoop/store.h"

namespace hoop_torch {

class C10dStoreAdapter final : public hoop::Store {
 public:
  C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> store, int rank)
      : store_(std::move(store)), rank_(rank) {
    timeout_ = store_->getTimeout();
  }

  void set(const std::string& key, const hoop::Bytes& value) override {
    guarded("store.set", key, [&] { store_->set(key, value); });
  }
  hoop::Bytes get(const std::string& key) override {
    hoop::Bytes out;
    guarded("store.get", key, [&] { out = store_->get(key); });
    return out;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t out = 0;
    guarded("store.add", key, [&] { out = store_->add(key, delta); });
    return out;
  }
  hoop::Bytes compare_set(const std::string& key, const hoop::Bytes& expected,
                          const hoop::Bytes& desired) override {
    hoop::Bytes out;
    guarded("store.compare_set", key, [&] {
      out = store_->compareSet(key, expected, desired);
      // torch 1.13's TCPStore does not wake clients blocked in get() on a compareSet; setting
      // the value it now holds again does. hoop's first-writer-wins keys are then never
      // changed again, so the second write cannot undo anyone else's.
      if (out == desired) store_->set(key, desired);
    });
    return out;
  }
  void wait(const std::vector<std::string>& keys) override {
    guarded("store.wait", keys.empty() ? std::string() : keys.front(), [&] { store_->wait(keys); });
  }
  bool check(const std::string& key) override {
    bool out = false;
    guarded("store.check", key, [&] { out = store_->check({key}); });
    return out;
  }
  bool remove(const std::string& key) override {
    bool out = false;
    guarded("store.remove", key, [&] { out = store_->deleteKey(key); });
    return out;
  }

 private:
  // torch's store reports failures (timeouts included) as c10::Error; hoop's callers expect
  // hoop::Error with the rank and the key.
  template <typename F>
  void guarded(const char* op, const std::string& key, F&& f) {
    try {
      f();
    } catch (const hoop::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw hoop::Error(hoop::ErrorCode::init,
                        "torch store failed on key '" + key + "': " + first_line(e.what()),
                        hoop::ErrorContext{rank_, op, 0, -1});
    }
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
};

}  // namespace hoop_torch
