#pragma once
/// @file
/// file_layer_loader: a layer_loader reading each layer's bytes from a region of one file.

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <ios>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/stream/layer_window.hpp"

namespace frugal::stream {

/// Reads layer i from bytes [offsets[i], offsets[i + 1]) of a file (offsets ascending, the
/// last one the end of the weights), with real reads through a std::ifstream. Throws
/// frugal::invalid_argument for offsets that descend or pass the largest file offset, and
/// frugal::runtime_error when the file cannot be opened, is shorter than the last offset,
/// or a read comes back short.
/// @code
/// frugal::stream::file_layer_loader loader("weights.bin", {0, 4096, 8192});  // two layers
/// @endcode
class file_layer_loader {
public:
    file_layer_loader(std::filesystem::path path, std::vector<std::size_t> offsets)
        : path_(std::move(path)), offsets_(std::move(offsets)), in_(path_, std::ios::binary) {
        FRUGAL_CHECK(offsets_.size() >= 2, "file_layer_loader: need at least two offsets (one layer), got ",
                     offsets_.size());
        for (std::size_t i = 1; i < offsets_.size(); ++i)
            FRUGAL_CHECK(offsets_[i] >= offsets_[i - 1], "file_layer_loader: offsets must ascend; offset ", i, " = ",
                         offsets_[i], " < ", offsets_[i - 1]);
        (void)checked_cast<std::streamoff>(offsets_.back(), "file_layer_loader: last offset");
        FRUGAL_CHECK_AS(runtime_error, in_.is_open(), "file_layer_loader: cannot open ", path_);
        std::error_code ec;
        const auto size = std::filesystem::file_size(path_, ec);
        FRUGAL_CHECK_AS(runtime_error, !ec, "file_layer_loader: cannot read the size of ", path_, ": ", ec.message());
        FRUGAL_CHECK_AS(runtime_error, size >= offsets_.back(), "file_layer_loader: ", path_, " has ", size,
                        " bytes, the layers end at ", offsets_.back());
    }

    [[nodiscard]] std::size_t layer_count() const noexcept { return offsets_.size() - 1; }
    [[nodiscard]] std::size_t layer_bytes(std::size_t layer) const {
        FRUGAL_CHECK_AS(out_of_range, layer < layer_count(), "file_layer_loader: layer ", layer, " >= ", layer_count());
        return offsets_[layer + 1] - offsets_[layer];
    }

    /// Reads layer `layer` into `dst` (exactly layer_bytes(layer) bytes).
    void load(std::size_t layer, std::span<std::byte> dst) {
        FRUGAL_CHECK(dst.size() == layer_bytes(layer), "file_layer_loader: buffer of ", dst.size(), " bytes for layer ",
                     layer, " of ", layer_bytes(layer));
        in_.clear();
        in_.seekg(static_cast<std::streamoff>(offsets_[layer]));
        in_.read(reinterpret_cast<char*>(dst.data()), static_cast<std::streamsize>(dst.size()));
        FRUGAL_CHECK_AS(runtime_error, in_.gcount() == static_cast<std::streamsize>(dst.size()),
                        "file_layer_loader: short read of layer ", layer, " from ", path_, ": ", in_.gcount(), " of ",
                        dst.size(), " bytes");
    }

private:
    std::filesystem::path path_;
    std::vector<std::size_t> offsets_;
    std::ifstream in_;
};
static_assert(layer_loader<file_layer_loader>);

}  // namespace frugal::stream
