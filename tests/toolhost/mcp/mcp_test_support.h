// Shared by the MCP client tests: running the event loop until something happens, and collecting
// a call's outcome and progress.
#pragma once

#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QList>
#include <QPointer>

#include <functional>
#include <optional>
#include <utility>

#include "mcpprovider.h"

namespace neural::toolhost::test {

// Runs the event loop until `done` or `ms` passed; returns done().
inline bool spin(const std::function<bool()>& done, int ms = 20000) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    return done();
}

// One call's signals.
struct CallRecord {
    QPointer<ToolCall> call;
    std::optional<ToolOutcome> outcome;
    int finishedCount = 0;
    QList<std::pair<double, QString>> progress;
};

// Starts `tool` on `provider` and records what the call reports.
inline std::shared_ptr<CallRecord> startCall(McpProvider& provider, const QString& tool,
                                             const QString& arguments, CallLimits limits = {}) {
    auto record = std::make_shared<CallRecord>();
    ToolCall* call = provider.call(tool, arguments, limits);
    record->call = call;
    QObject::connect(call, &ToolCall::finished, call, [record](const ToolOutcome& o) {
        record->outcome = o;
        ++record->finishedCount;
    });
    QObject::connect(call, &ToolCall::progress, call, [record](double f, const QString& m) {
        record->progress.append({f, m});
    });
    return record;
}

// Runs a call to its end (or `ms`) and returns its outcome; a call that never finishes fails the
// test with a status of failed.
inline ToolOutcome runCall(McpProvider& provider, const QString& tool, const QString& arguments,
                           CallLimits limits = {}, int ms = 30000) {
    auto record = startCall(provider, tool, arguments, limits);
    EXPECT_FALSE(record->outcome.has_value()) << "a call never finishes inside call()";
    if (!spin([&] { return record->outcome.has_value(); }, ms)) {
        ADD_FAILURE() << "the call of " << tool.toStdString() << " did not finish";
        ToolOutcome o;
        o.status = ToolOutcome::Status::failed;
        o.text = QStringLiteral("(did not finish)");
        return o;
    }
    return *record->outcome;
}

// Starts the provider and waits until it is ready or failed.
inline bool startAndWait(McpProvider& provider, int ms = 30000) {
    bool settled = false;
    auto c = QObject::connect(&provider, &ToolProvider::changed, &provider, [&] {
        settled = provider.ready() ||
                  !provider.problem().startsWith(QLatin1String("the server is starting"));
    });
    provider.start();
    spin([&] { return settled; }, ms);
    QObject::disconnect(c);
    return provider.ready();
}

}  // namespace neural::toolhost::test

// gtest printing of statuses.
namespace neural::toolhost {
inline void PrintTo(ToolOutcome::Status s, std::ostream* os) { *os << statusName(s).toStdString(); }
}  // namespace neural::toolhost
