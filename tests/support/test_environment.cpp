// Linked into every test executable: the learned expert statistics of the models the tests load
// (runtime/routing_stats.h, "auto" by default) go to a folder of this process that is removed at
// exit, so no test writes beside the shared fixtures or into the user's data folder, and no run
// sees what an earlier one learned. A test (or the caller) that sets NEURAL_ROUTING_STATS_DIR
// itself keeps its own.
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace {

struct RoutingStatsFolder {
    std::filesystem::path dir;
    RoutingStatsFolder() {
        if (const char* set = std::getenv("NEURAL_ROUTING_STATS_DIR"); set != nullptr && *set) {
            return;
        }
        std::error_code ec;
        std::random_device rd;
        const std::filesystem::path p =
            std::filesystem::temp_directory_path(ec) /
            ("neural-test-stats-" + std::to_string(rd()) + "-" + std::to_string(rd()));
        if (ec || !std::filesystem::create_directories(p, ec)) return;
        dir = p;
        const std::string value = p.string();
#ifdef _WIN32
        _putenv_s("NEURAL_ROUTING_STATS_DIR", value.c_str());
#else
        setenv("NEURAL_ROUTING_STATS_DIR", value.c_str(), 1);
#endif
    }
    ~RoutingStatsFolder() {
        std::error_code ec;
        if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
};

const RoutingStatsFolder folder;

}  // namespace
