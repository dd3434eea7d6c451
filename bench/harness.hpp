#pragma once
// frugal-bench's harness: the subcommand interface, the result sink (JSON lines or a
// table), report sections and plot specs, and the timing helper every command uses.

#include <chrono>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace frugal::bench {

using record = nlohmann::ordered_json;

/// Collects result records; prints each as one JSON line with --json, else a table at flush().
class result_sink {
public:
    result_sink(std::ostream& out, bool json) : out_(out), json_(json) {}
    void add(record r);
    void flush();
    [[nodiscard]] const std::vector<record>& records() const noexcept { return records_; }

private:
    std::ostream& out_;
    bool json_;
    std::vector<record> records_;
    std::size_t printed_ = 0;
};

/// Formats a record value for tables and markdown (numbers to 4 significant digits).
std::string format_value(const record& value);

/// A plot of one section's records, drawn by bench/plot.py with matplotlib.
struct plot_spec {
    std::string file;           // PNG name inside the report folder
    std::string title;
    std::string x, y;           // record fields
    std::string series;         // field whose values make separate lines ("" = one line)
    std::string xlabel, ylabel;
    bool logx = false, logy = false;
    std::string kind = "line";  // "line" or "bar"
    record filter = record::object();  // only records whose fields equal these values
};

/// What the report needs from a subcommand.
struct report_context {
    std::optional<std::filesystem::path> data_dir;  // ../shared/data or --data; empty: generate
    bool quick = false;                              // tiny workloads (used by the tests)
    /// `relative` inside the data folder, when the folder is there and holds it.
    [[nodiscard]] std::optional<std::filesystem::path> data_file(const std::string& relative) const;
};

/// One line of the report's opening table: a headline figure of a section, the baseline or
/// peer it is measured against in the same run, and the target it must meet (if any).
struct headline {
    std::string what;      // e.g. "decode, batch 8 x 4096, paged f32: bandwidth / membw"
    double value = 0;      // the measured figure (a ratio when `baseline` is set)
    std::string baseline;  // what `value` is relative to, in words ("" for an absolute figure)
    std::string target;    // e.g. ">= 0.80" ("" when the figure has no target)
    bool met = true;       // whether `value` meets `target`
};

/// A table of some of a section's records: those whose fields equal `filter`, showing
/// `columns` (every field of the selected records when empty).
struct table_spec {
    std::string title;  // "" for a section's only table
    std::vector<std::string> columns;
    record filter = record::object();
};

struct report_section {
    std::string title;
    std::string data_source;  // which data the section used, in words
    std::string notes;        // markdown shown under the title
    std::vector<record> records;
    std::vector<std::string> columns;  // the single table's columns when `tables` is empty ("" = every field)
    std::vector<table_spec> tables;    // several tables of unrelated records; empty = one table
    std::vector<plot_spec> plots;
    std::vector<headline> headlines;   // rows of the report's opening table
};

/// One `frugal-bench <name>` subcommand. Options are bound to members in configure().
class subcommand {
public:
    virtual ~subcommand() = default;
    [[nodiscard]] virtual std::string name() const = 0;
    [[nodiscard]] virtual std::string summary() const = 0;
    /// Position of the section in the report (smaller first).
    [[nodiscard]] virtual int report_order() const { return 100; }
    virtual void configure(CLI::App& app) = 0;
    /// Runs with the parsed options; returns the process exit code.
    virtual int run(result_sink& sink) = 0;
    /// Runs the report's workload for this section.
    virtual report_section report(const report_context& ctx) = 0;
};

std::vector<std::unique_ptr<subcommand>>& registry();

template <class Command>
struct registrar {
    registrar() { registry().push_back(std::make_unique<Command>()); }
};

/// Registers a subcommand type; place once in the command's .cpp file.
#define FRUGAL_BENCH_COMMAND(type) \
    [[maybe_unused]] static const ::frugal::bench::registrar<type> frugal_bench_registrar_##type {}

/// Timing of repeated runs of one callable.
struct timing {
    double median_ms = 0, min_ms = 0;
    int runs = 0;
};

/// Runs `fn` once to warm up, then until `min_seconds` have passed and at least
/// `min_runs` runs were made; reports the median and the minimum.
timing measure(const std::function<void()>& fn, double min_seconds = 0.2, int min_runs = 3);

}  // namespace frugal::bench
