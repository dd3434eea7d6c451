// The history file loader on mutated files: a valid file, then flipped bytes, cut tails and
// overwritten header fields (with the checksum fixed up half of the time, so the checks
// behind it are reached). A load either throws frugal::error or gives a consistent history
// (within its bound, its documents adding up to its size); an untouched file loads back
// exactly.
#include <frugal/core/error.hpp>
#include <frugal/core/hash.hpp>
#include <frugal/draft/history.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    // In memory where there is a tmpfs: each input saves once, and fsync on a disk is slow.
    static const auto file = (std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                         : std::filesystem::temp_directory_path()) /
                             ("frugal_draft_history_file_fuzz." + std::to_string(::getpid()));
    static const int removed_at_exit = std::atexit([] { std::filesystem::remove(file); });
    (void)removed_at_exit;
    frugal::draft::live_history<int> history(2 + in.below(200));
    std::vector<std::vector<int>> docs(in.below(6));
    for (auto& d : docs) {
        d.resize(1 + in.below(20));
        for (auto& t : d) t = int(in.below(50));
        history.add(d);
    }
    history.publish();
    std::vector<std::vector<int>> held;  // after the bound's evictions
    history.snapshot()->for_each_document([&](std::span<const int> d) { held.emplace_back(d.begin(), d.end()); });
    history.save(file);
    std::string bytes;
    {
        std::ifstream f(file, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    bool touched = false;
    for (std::size_t k = in.below(4); k > 0 && !bytes.empty(); --k) {
        touched = true;
        switch (in.below(3)) {
        case 0:
            bytes[in.below(bytes.size())] ^= char(1 + in.below(255));
            break;
        case 1:
            bytes.resize(in.below(bytes.size()));
            break;
        default: {  // a u64 or u32 field of the header
            const std::size_t at = std::min<std::size_t>(bytes.size(), 8 + 4 * in.below(10));
            const auto v = in.take<std::uint64_t>() >> in.below(64);
            std::memcpy(bytes.data() + at, &v, std::min<std::size_t>(8, bytes.size() - at));
        }
        }
        if (bytes.size() >= 8 && in.below(2) == 0) {  // a valid checksum over the damage
            const std::uint64_t sum = frugal::fnv1a(
                std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size() - 8));
            std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
        }
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    try {
        const frugal::draft::live_history<int> loaded(file);
        const auto snap = loaded.snapshot();
        std::size_t total = 0, count = 0;
        snap->for_each_document([&](std::span<const int> d) {
            FRUGAL_FUZZ_CHECK(!d.empty(), "an empty document");
            total += d.size();
            ++count;
        });
        FRUGAL_FUZZ_CHECK(total == snap->size() && count == snap->documents(), "inconsistent sizes");
        FRUGAL_FUZZ_CHECK(snap->size() <= loaded.max_tokens(), "over the bound");
        if (!touched) {
            std::size_t i = 0;
            snap->for_each_document([&](std::span<const int> d) {
                FRUGAL_FUZZ_CHECK(i < held.size() && std::equal(d.begin(), d.end(), held[i].begin(), held[i].end()),
                                  "document %zu differs", i);
                ++i;
            });
            FRUGAL_FUZZ_CHECK(i == held.size(), "%zu documents, want %zu", i, held.size());
        }
    } catch (const frugal::runtime_error&) {
        FRUGAL_FUZZ_CHECK(touched, "an untouched file failed to load");
    }
    return 0;
}
