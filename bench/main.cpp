// frugal-bench: one executable, one subcommand per module, plus `report`.
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "harness.hpp"
#include "report.hpp"

int main(int argc, char** argv) {
    using namespace frugal::bench;
    CLI::App app{"frugal-bench: frugal's algorithms against their baselines, measured in one run.\n"
                 "Each subcommand prints a table, or one JSON object per result with --json."};
    app.require_subcommand(1);
    bool json = false;

    auto& commands = registry();
    std::sort(commands.begin(), commands.end(),
              [](const auto& a, const auto& b) { return a->report_order() < b->report_order(); });
    std::vector<std::pair<CLI::App*, subcommand*>> parsers;
    for (auto& command : commands) {
        CLI::App* sub = app.add_subcommand(command->name(), command->summary());
        sub->add_flag("--json", json, "print one JSON object per result line");
        command->configure(*sub);
        parsers.emplace_back(sub, command.get());
    }
    report_options report;
    CLI::App* report_app = app.add_subcommand("report", "run every section and write DIR/report.md with plots");
    configure_report(*report_app, report);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        if (report_app->parsed()) return run_report(report, commands);
        for (auto& [sub, command] : parsers) {
            if (!sub->parsed()) continue;
            result_sink sink(std::cout, json);
            const int rc = command->run(sink);
            sink.flush();
            return rc;
        }
    } catch (const std::exception& e) {
        std::cerr << "frugal-bench: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
