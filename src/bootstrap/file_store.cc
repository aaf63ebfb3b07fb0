// A store on a (shared) filesystem: one file per key. A write goes to a temporary file that
// is renamed over the key's file, so readers see the old value or the new one, never half;
// writers serialise on flock() of a lock file so that add and compare_set are atomic. get
// and wait poll every 10 ms: a filesystem has no portable way to wake a waiter on another
// host.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>

#include "bootstrap/store_values.h"
#include "bootstrap/timed_store.h"
#include "core/clock.h"
#include "core/errors.h"
#include "hoop/store.h"

namespace hoop {

namespace {

constexpr milliseconds kPollInterval{10};
// Escaped names longer than this are shortened and completed by a hash of the whole key.
constexpr size_t kMaxPlainName = 200;

uint64_t fnv1a(const std::string& s, bool reversed) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < s.size(); ++i) {
    h ^= static_cast<uint8_t>(reversed ? s[s.size() - 1 - i] : s[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

// A key as a file name: letters, digits, '_', '-' and '.' (not leading) stay, everything else
// becomes %XX. Names of the store's own files start with '.', which no key's name does.
std::string file_name(const std::string& key) {
  std::string name;
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || c == '_' || c == '-' || (c == '.' && i > 0)) {
      name.push_back(static_cast<char>(c));
    } else {
      name += fmt::format("%{:02X}", c);
    }
  }
  if (name.size() > kMaxPlainName) {
    // '~' never appears in a plain name (it is escaped), so shortened names cannot collide
    // with plain ones.
    name = fmt::format("{}~{:016x}{:016x}", name.substr(0, 150), fnv1a(key, false),
                       fnv1a(key, true));
  }
  return name;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

class FileStore final : public bootstrap::TimedStore {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec || !std::filesystem::is_directory(dir_)) {
      throw_error(ErrorCode::init,
                  fmt::format("file store: cannot use directory {}: {}", dir_,
                              ec ? ec.message() : "not a directory"),
                  {.op = "store.open"});
    }
  }

  void set(const std::string& key, const Bytes& value) override {
    const std::string path = path_of(key, "store.set");
    Fd lock = lock_all("store.set");
    write_atomically(path, value, "store.set");
  }

  Bytes get_within(const std::string& key, milliseconds limit) override {
    const std::string path = path_of(key, "store.get");
    const TimePoint deadline = Clock::now() + limit;
    for (;;) {
      if (auto value = read_file(path, "store.get")) return std::move(*value);
      if (Clock::now() >= deadline) {
        throw_error(ErrorCode::timeout,
                    fmt::format("key '{}' was not set within {:.3g} s (file store {})", key,
                                limit.count() / 1000.0, dir_),
                    {.op = "store.get"});
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  void wait_within(const std::vector<std::string>& keys, milliseconds limit) override {
    const TimePoint deadline = Clock::now() + limit;
    for (const auto& key : keys) {
      const std::string path = path_of(key, "store.wait");
      while (!exists(path)) {
        if (Clock::now() >= deadline) {
          throw_error(ErrorCode::timeout,
                      fmt::format("key '{}' (of {} waited on) was not set within {:.3g} s "
                                  "(file store {})",
                                  key, keys.size(), limit.count() / 1000.0, dir_),
                      {.op = "store.wait"});
        }
        std::this_thread::sleep_for(kPollInterval);
      }
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    const std::string path = path_of(key, "store.add");
    Fd lock = lock_all("store.add");
    std::optional<Bytes> current = read_file(path, "store.add");
    int64_t result = 0;
    std::string error;
    if (!bootstrap::apply_add(current ? &*current : nullptr, delta, &result, &error)) {
      throw_error(ErrorCode::invalid_argument, fmt::format("add to key '{}': {}", key, error),
                  {.op = "store.add"});
    }
    write_atomically(path, bootstrap::to_bytes(std::to_string(result)), "store.add");
    return result;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    const std::string path = path_of(key, "store.compare_set");
    Fd lock = lock_all("store.compare_set");
    std::optional<Bytes> current = read_file(path, "store.compare_set");
    if (!bootstrap::compare_set_matches(current ? &*current : nullptr, expected)) {
      return current ? std::move(*current) : Bytes{};
    }
    write_atomically(path, desired, "store.compare_set");
    return desired;
  }

  bool check(const std::string& key) override { return exists(path_of(key, "store.check")); }

  bool remove(const std::string& key) override {
    const std::string path = path_of(key, "store.remove");
    Fd lock = lock_all("store.remove");
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    int err = errno;
    throw_system_error(ErrorCode::init, fmt::format("file store: cannot remove {}", path), err,
                       {.op = "store.remove"});
  }

 private:
  std::string path_of(const std::string& key, const char* op) const {
    HOOP_CHECK_ARG(!key.empty(), ErrorContext{.op = op}, "empty store key");
    return dir_ + "/" + file_name(key);
  }

  static bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
  }

  // Serialises writers of this store, in this process and in every other.
  Fd lock_all(const char* op) const {
    const std::string path = dir_ + "/.lock";
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) {
      int err = errno;
      throw_system_error(ErrorCode::init, fmt::format("file store: cannot open {}", path), err,
                         {.op = op});
    }
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      throw_system_error(ErrorCode::init, fmt::format("file store: cannot lock {}", path), err,
                         {.op = op});
    }
    return fd;  // closing it releases the lock
  }

  std::optional<Bytes> read_file(const std::string& path, const char* op) const {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT) return std::nullopt;
      int err = errno;
      throw_system_error(ErrorCode::init, fmt::format("file store: cannot read {}", path), err,
                         {.op = op});
    }
    Bytes data;
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        data.insert(data.end(), buf, buf + n);
      } else if (n == 0) {
        return data;
      } else if (errno != EINTR) {
        int err = errno;
        throw_system_error(ErrorCode::init, fmt::format("file store: cannot read {}", path), err,
                           {.op = op});
      }
    }
  }

  void write_atomically(const std::string& path, const Bytes& value, const char* op) const {
    std::string tmp = dir_ + "/.tmp-XXXXXX";
    int raw = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (raw < 0) {
      int err = errno;
      throw_system_error(ErrorCode::init, fmt::format("file store: cannot create a file in {}", dir_),
                         err, {.op = op});
    }
    {
      Fd fd(raw);
      size_t off = 0;
      while (off < value.size()) {
        ssize_t n = ::write(fd.get(), value.data() + off, value.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          int err = errno;
          ::unlink(tmp.c_str());
          throw_system_error(ErrorCode::init, fmt::format("file store: cannot write {}", tmp), err,
                             {.op = op});
        }
        off += static_cast<size_t>(n);
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      throw_system_error(ErrorCode::init, fmt::format("file store: cannot rename onto {}", path),
                         err, {.op = op});
    }
  }

  std::string dir_;
};

}  // namespace

std::shared_ptr<Store> open_file_store(const std::string& dir) {
  HOOP_CHECK_ARG(!dir.empty(), ErrorContext{.op = "store.open"}, "file store: empty directory");
  return std::make_shared<FileStore>(dir);
}

}  // namespace hoop
