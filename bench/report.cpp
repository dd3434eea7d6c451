#include "report.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

namespace frugal::bench {
namespace fs = std::filesystem;

void configure_report(CLI::App& app, report_options& options) {
    app.add_option("--out", options.out, "folder for report.md, the plots and the JSON records")
        ->capture_default_str();
    app.add_option("--data", options.data,
                   "evaluation data folder (default: ../shared/data when it exists)");
    app.add_flag("--no-data", options.no_data, "use only generated workloads, even if data exists");
    app.add_flag("--quick", options.quick, "tiny workloads: checks the harness, not the algorithms");
    app.add_option("--only", options.only, "run only these sections");
}

namespace {

std::optional<fs::path> resolve_data_dir(const report_options& options) {
    if (options.no_data) return std::nullopt;
    if (!options.data.empty()) {
        if (!fs::is_directory(options.data)) {
            throw std::runtime_error("--data " + options.data.string() + " is not a folder");
        }
        return fs::canonical(options.data);
    }
    for (const fs::path& candidate : {fs::path(FRUGAL_DEFAULT_DATA_DIR), fs::path("../shared/data")}) {
        if (fs::is_directory(candidate)) return fs::canonical(candidate);
    }
    return std::nullopt;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

fs::path plot_script() {
    if (fs::exists(FRUGAL_BENCH_PLOT_SCRIPT)) return FRUGAL_BENCH_PLOT_SCRIPT;
    std::error_code ec;  // an installed frugal-bench keeps plot.py beside itself
    const auto beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "plot.py";
    return beside;
}

std::string python() {
    if (const char* env = std::getenv("FRUGAL_PYTHON"); env != nullptr && *env != '\0') return env;
    // Debian's python3-matplotlib lives in the system interpreter, which a pyenv or
    // virtualenv python3 earlier on PATH would not see.
    return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

bool matches(const record& r, const record& filter) {
    for (const auto& [key, value] : filter.items())
        if (!r.contains(key) || r[key] != value) return false;
    return true;
}

void write_table(std::ostream& md, const std::vector<record>& all, const table_spec& spec) {
    std::vector<const record*> rows;
    for (const auto& r : all)
        if (matches(r, spec.filter)) rows.push_back(&r);
    if (!spec.title.empty()) md << "### " << spec.title << "\n\n";
    if (rows.empty()) {
        md << "_No results._\n\n";
        return;
    }
    std::vector<std::string> columns = spec.columns;
    if (columns.empty()) {
        std::set<std::string> seen;
        for (const record* r : rows)
            for (const auto& [key, _] : r->items())
                if (seen.insert(key).second) columns.push_back(key);
    }
    md << "|";
    for (const auto& c : columns) md << " " << c << " |";
    md << "\n|";
    for (std::size_t i = 0; i < columns.size(); ++i) md << "---|";
    md << "\n";
    for (const record* r : rows) {
        md << "|";
        for (const auto& c : columns) md << " " << (r->contains(c) ? format_value((*r)[c]) : "") << " |";
        md << "\n";
    }
    md << "\n";
}

// The first line a command prints, or "" when it fails (used for the revision and tools).
std::string first_line_of(const std::string& command) {
    std::string out;
    if (FILE* p = popen(command.c_str(), "r")) {
        char buf[512];
        if (std::fgets(buf, sizeof buf, p) != nullptr) out = buf;
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

// The revision the figures came from: the commit of the source tree frugal-bench was built
// from, marked "+ local changes" when the tree differs from it.
std::string source_revision() {
    const std::string git = "git -C " + shell_quote(FRUGAL_BENCH_SOURCE_DIR) + " ";
    const std::string commit = first_line_of(git + "rev-parse --short=12 HEAD 2>/dev/null");
    if (commit.empty()) return "unknown (not built from a git checkout)";
    const bool dirty = !first_line_of(git + "status --porcelain --untracked-files=no 2>/dev/null").empty();
    return commit + (dirty ? " + local changes" : "");
}

// Every data file a report can read, with its size: enough to tell two runs' inputs apart.
std::string data_listing(const fs::path& dir) {
    std::vector<std::string> lines;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file() || e.path().filename() == "README.md") continue;
        lines.push_back("  - `" + fs::relative(e.path(), dir).string() + "` (" + std::to_string(e.file_size()) + " bytes)");
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
}

void write_headlines(std::ostream& md, const std::vector<std::pair<std::string, report_section>>& sections) {
    std::size_t rows = 0;
    for (const auto& [name, s] : sections) rows += s.headlines.size();
    if (rows == 0) return;
    md << "## Headline figures\n\n"
       << "Each figure is measured in this run against the baseline or peer named beside it.\n\n"
       << "| section | figure | value | relative to | target | met |\n|---|---|---|---|---|---|\n";
    for (const auto& [name, s] : sections)
        for (const auto& h : s.headlines)
            md << "| " << name << " | " << h.what << " | " << format_value(record(h.value)) << " | "
               << (h.baseline.empty() ? "—" : h.baseline) << " | " << (h.target.empty() ? "—" : h.target) << " | "
               << (h.target.empty() ? "" : (h.met ? "yes" : "**no**")) << " |\n";
    md << "\n";
}

}  // namespace

int run_report(const report_options& options, const std::vector<std::unique_ptr<subcommand>>& commands) {
    report_context ctx;
    ctx.data_dir = resolve_data_dir(options);
    ctx.quick = options.quick;
    fs::create_directories(options.out);
    const fs::path out = fs::canonical(options.out);

    std::vector<std::pair<std::string, report_section>> sections;
    std::vector<std::string> failures;
    for (const auto& command : commands) {
        if (!options.only.empty() &&
            std::find(options.only.begin(), options.only.end(), command->name()) == options.only.end()) {
            continue;
        }
        std::cerr << "frugal-bench report: running section '" << command->name() << "'\n";
        report_section section;
        try {
            section = command->report(ctx);
        } catch (const std::exception& e) {
            section.title = command->name();
            section.notes = std::string("**This section failed:** ") + e.what();
            failures.push_back(command->name() + ": " + e.what());
        }
        std::ofstream jsonl(out / (command->name() + ".jsonl"));
        for (const auto& r : section.records) jsonl << r.dump() << "\n";
        sections.emplace_back(command->name(), std::move(section));
    }

    // Plots: one spec list for bench/plot.py.
    record specs = record::array();
    for (const auto& [name, section] : sections) {
        for (const auto& p : section.plots) {
            specs.push_back({{"jsonl", (out / (name + ".jsonl")).string()}, {"out", (out / p.file).string()},
                             {"title", p.title}, {"x", p.x}, {"y", p.y}, {"series", p.series},
                             {"xlabel", p.xlabel.empty() ? p.x : p.xlabel},
                             {"ylabel", p.ylabel.empty() ? p.y : p.ylabel}, {"logx", p.logx},
                             {"logy", p.logy}, {"kind", p.kind}, {"filter", p.filter}});
        }
    }
    std::string plot_status = "no plots requested";
    if (!specs.empty()) {
        std::ofstream(out / "plots.json") << specs.dump(2);
        const std::string cmd = shell_quote(python()) + " " + shell_quote(plot_script().string()) + " " +
                                shell_quote((out / "plots.json").string());
        const int rc = std::system(cmd.c_str());
        plot_status = rc == 0 ? "drawn with matplotlib (bench/plot.py)"
                              : "NOT drawn: bench/plot.py failed (is python3-matplotlib installed?)";
        if (rc != 0) std::cerr << "frugal-bench report: plotting failed (exit " << rc << ")\n";
    }

    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    std::ofstream md(out / "report.md");
    md << "# frugal benchmark report\n\n"
       << "- date: " << date << "\n- machine: " << cpu_model() << ", "
       << std::thread::hardware_concurrency() << " hardware threads\n"
       << "- frugal: " << source_revision() << "\n"
       << "- compiler: " << FRUGAL_BENCH_COMPILER << " (" << __VERSION__ << ")\n"
       << "- flags: `" << FRUGAL_BENCH_FLAGS << "`\n"
       << "- evaluation data: "
       << (ctx.data_dir ? ctx.data_dir->string() + "\n" + data_listing(*ctx.data_dir)
                        : std::string("none (generated workloads only)\n"))
       << "- workloads: " << (ctx.quick ? "quick (harness check; figures are not meaningful)" : "full") << "\n"
       << "- plots: " << plot_status << "\n\n"
       << "Every figure is measured in this run, side by side with its baseline; ratios are "
          "what to read, absolute times vary with the machine's load.\n\n";
    write_headlines(md, sections);
    for (const auto& [name, section] : sections) {
        md << "## " << (section.title.empty() ? name : section.title) << "\n\n";
        if (!section.data_source.empty()) md << "Data: " << section.data_source << "\n\n";
        if (!section.notes.empty()) md << section.notes << "\n\n";
        if (section.tables.empty()) {
            write_table(md, section.records, table_spec{.title = "", .columns = section.columns});
        } else {
            for (const auto& t : section.tables) write_table(md, section.records, t);
        }
        for (const auto& p : section.plots) {
            if (fs::exists(out / p.file)) md << "![" << p.title << "](" << p.file << ")\n\n";
        }
        md << "Records: `" << name << ".jsonl`\n\n";
    }
    md.close();
    std::cout << "report written to " << (out / "report.md").string() << "\n";
    for (const auto& f : failures) std::cerr << "frugal-bench report: section failed: " << f << "\n";
    return failures.empty() ? 0 : 1;
}

}  // namespace frugal::bench
