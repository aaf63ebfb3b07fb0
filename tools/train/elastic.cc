#include "elastic.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace hoop::train::elastic {

namespace fs = std::filesystem;

std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir) {
  std::ifstream f(fs::path(checkpoint_dir) / "latest");
  std::string name;
  if (!(f >> name) || name.empty()) return std::nullopt;
  const fs::path dir = fs::path(checkpoint_dir) / name;
  if (!fs::is_directory(dir)) return std::nullopt;
  return dir.string();
}

void save_checkpoint(dp::DataParallel& dp, Communicator* comm, const std::string& checkpoint_dir,
                     uint64_t step) {
  const std::string name = "step-" + std::to_string(step);
  fs::create_directories(checkpoint_dir);
  dp.save((fs::path(checkpoint_dir) / name).string());
  if (comm) comm->barrier();  // every shard is on disk before "latest" names the checkpoint
  if (!comm || comm->rank() == 0) {
    const fs::path tmp = fs::path(checkpoint_dir) / "latest.tmp";
    {
      std::ofstream f(tmp);
      f << name << "\n";
    }
    fs::rename(tmp, fs::path(checkpoint_dir) / "latest");
  }
}

}  // namespace hoop::train::elastic
