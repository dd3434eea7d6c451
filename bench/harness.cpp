#include "harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>

namespace frugal::bench {

std::vector<std::unique_ptr<subcommand>>& registry() {
    static std::vector<std::unique_ptr<subcommand>> commands;
    return commands;
}

std::string format_value(const record& value) {
    if (value.is_number_float()) {
        const double v = value.get<double>();
        if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", v);
        return buf;
    }
    if (value.is_string()) return value.get<std::string>();
    return value.dump();
}

void result_sink::add(record r) {
    if (json_) out_ << r.dump() << "\n" << std::flush;
    records_.push_back(std::move(r));
}

void result_sink::flush() {
    if (json_ || printed_ == records_.size()) return;
    // Group consecutive records with the same fields into one table each.
    std::size_t begin = printed_;
    while (begin < records_.size()) {
        std::vector<std::string> columns;
        for (const auto& [key, _] : records_[begin].items()) columns.push_back(key);
        std::size_t end = begin + 1;
        const auto same_keys = [&](const record& r) {
            if (r.size() != columns.size()) return false;
            std::size_t i = 0;
            for (const auto& [key, _] : r.items()) if (key != columns[i++]) return false;
            return true;
        };
        while (end < records_.size() && same_keys(records_[end])) ++end;
        std::vector<std::size_t> width(columns.size());
        for (std::size_t c = 0; c < columns.size(); ++c) {
            width[c] = columns[c].size();
            for (std::size_t r = begin; r < end; ++r)
                width[c] = std::max(width[c], format_value(records_[r][columns[c]]).size());
        }
        for (std::size_t c = 0; c < columns.size(); ++c) out_ << std::setw(int(width[c]) + 2) << columns[c];
        out_ << "\n";
        for (std::size_t r = begin; r < end; ++r) {
            for (std::size_t c = 0; c < columns.size(); ++c)
                out_ << std::setw(int(width[c]) + 2) << format_value(records_[r][columns[c]]);
            out_ << "\n";
        }
        out_ << "\n";
        begin = end;
    }
    printed_ = records_.size();
}

std::optional<std::filesystem::path> report_context::data_file(const std::string& relative) const {
    if (!data_dir) return std::nullopt;
    auto file = *data_dir / relative;
    if (!std::filesystem::exists(file)) return std::nullopt;
    return file;
}

headline untargeted(std::string what, double value, std::string baseline) {
    return {std::move(what), value, std::move(baseline), "", true};
}

headline at_least(std::string what, double value, std::string baseline, double min) {
    return {std::move(what), value, std::move(baseline), ">= " + format_value(record(min)), value >= min};
}

headline at_most(std::string what, double value, std::string baseline, double max) {
    return {std::move(what), value, std::move(baseline), "<= " + format_value(record(max)), value <= max};
}

bool record_matches(const record& r, const record& filter) {
    for (const auto& [key, value] : filter.items())
        if (!r.contains(key) || r[key] != value) return false;
    return true;
}

std::optional<double> find_number(const std::vector<record>& records, const record& filter, const std::string& field) {
    for (const auto& r : records)
        if (record_matches(r, filter) && r.contains(field) && r[field].is_number()) return r[field].get<double>();
    return std::nullopt;
}

timing measure(const std::function<void()>& fn, double min_seconds, int min_runs) {
    using clock = std::chrono::steady_clock;
    fn();  // warm-up: caches, page faults, lazy allocations
    std::vector<double> ms;
    const auto start = clock::now();
    while (static_cast<int>(ms.size()) < min_runs ||
           std::chrono::duration<double>(clock::now() - start).count() < min_seconds) {
        const auto t0 = clock::now();
        fn();
        ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return {ms[ms.size() / 2], ms.front(), static_cast<int>(ms.size())};
}

}  // namespace frugal::bench
