#pragma once
// `frugal-bench report`: runs every section and writes DIR/report.md with PNG plots.

#include <filesystem>
#include <memory>
#include <vector>

#include "harness.hpp"

namespace frugal::bench {

struct report_options {
    std::filesystem::path out = "frugal-report";
    std::filesystem::path data;  // empty: ../shared/data when present
    bool no_data = false;        // ignore ../shared/data even when present
    bool quick = false;
    std::vector<std::string> only;  // section names; empty = all
};

void configure_report(CLI::App& app, report_options& options);
int run_report(const report_options& options, const std::vector<std::unique_ptr<subcommand>>& commands);

}  // namespace frugal::bench
