// The prefix tree's and the QA bank's file loaders on mutated files: a valid file of each is
// written once, the input flips, overwrites and truncates its bytes, and load must either
// succeed with contents inside the budget or throw frugal::runtime_error, leaving the object
// as it was; any other exception or a crash is a finding.
#include <frugal/cache/prefix_tree.hpp>
#include <frugal/cache/semantic_cache.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

#include "fuzz.hpp"

namespace {

namespace fc = frugal::cache;

std::filesystem::path scratch(const char* name) {
    return std::filesystem::temp_directory_path() / (std::string("frugal_fuzz_") + std::to_string(::getpid()) + "_" + name);
}
std::string read(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The bytes `obj.save` writes.
template <class T>
std::string saved(const T& obj) {
    const auto p = scratch("seed");
    obj.save(p);
    std::string bytes = read(p);
    std::filesystem::remove(p);
    return bytes;
}

const std::string& tree_file() {
    static const std::string bytes = [] {
        fc::prefix_tree<std::uint32_t, std::uint32_t> t(frugal::memory_budget(1000));
        const std::vector<fc::chunk_value<std::uint32_t>> v{{1, 10, 2.0}, {2, 20, 1.0}, {3, 5, 0.5}};
        t.insert(std::vector<std::uint32_t>{1, 2, 3}, v);
        t.insert(std::vector<std::uint32_t>{1, 7}, std::vector<fc::chunk_value<std::uint32_t>>{{1, 10}, {9, 30}});
        t.insert(std::vector<std::uint32_t>{4}, std::vector<fc::chunk_value<std::uint32_t>>{{5, 8}}, 3);
        return saved(t);
    }();
    return bytes;
}

const std::string& bank_file() {
    static const std::string bytes = [] {
        fc::semantic_cache<std::string> b(16, 4, 0.9);
        b.insert("what is kv", std::vector<float>{1, 0, 0, 0}, std::string("keys and values"), {1, 2});
        b.insert("page size", std::vector<float>{0, 1, 0.5f, 0});
        b.insert("adapter", std::vector<float>{0, 0, 1, 1}, std::string(""), {}, 0.25f);
        return saved(b);
    }();
    return bytes;
}

std::string mutate(std::string bytes, frugal::fuzz::input& in) {
    const auto edits = in.below(4);
    for (std::uint64_t e = 0; e < edits && !bytes.empty(); ++e) {
        const auto at = in.below(bytes.size());
        switch (in.below(3)) {
            case 0: bytes[at] = static_cast<char>(bytes[at] ^ static_cast<char>(1 + in.below(255))); break;
            case 1: bytes.resize(at); break;
            default: {  // an 8-byte field overwritten (lengths, counts, sizes)
                const auto v = in.take<std::uint64_t>();
                for (std::size_t i = 0; i < 8 && at + i < bytes.size(); ++i) bytes[at + i] = static_cast<char>(v >> (8 * i));
            }
        }
    }
    return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    const bool tree = in.below(2) == 0;
    const auto path = scratch(tree ? "tree" : "bank");
    const std::string bytes = mutate(tree ? tree_file() : bank_file(), in);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (tree) {
        fc::prefix_tree<std::uint32_t, std::uint32_t> t(frugal::memory_budget(500));
        t.insert(std::vector<std::uint32_t>{99}, std::vector<fc::chunk_value<std::uint32_t>>{{99, 1}});
        try {
            t.load(path);
            FRUGAL_FUZZ_CHECK(t.bytes() <= t.budget(), "a loaded tree holds %zu bytes over %zu", t.bytes(), t.budget());
        } catch (const frugal::runtime_error&) {
            FRUGAL_FUZZ_CHECK(t.size() == 1 && t.cached_length(std::vector<std::uint32_t>{99}) == 1,
                              "a failed load changed the tree");
        }
    } else {
        fc::semantic_cache<std::string> b(2, 4, 0.9);
        b.insert("kept", std::vector<float>{1, 1, 1, 1});
        try {
            b.load(path);
            FRUGAL_FUZZ_CHECK(b.size() <= 2, "a loaded bank holds %zu entries over 2", b.size());
        } catch (const frugal::runtime_error&) {
            FRUGAL_FUZZ_CHECK(b.size() == 1 && b.lookup("kept", std::vector<float>{1, 1, 1, 1}).has_value(),
                              "a failed load changed the bank");
        }
    }
    std::filesystem::remove(path);
    return 0;
}
