// The built-in python tool (toolhost/builtin/pythontool.h) against the machine's own Python 3:
// state across calls, the reference's output form, tracebacks, the time and memory limits, no
// network, the working folder, cancel and restart, and the errors of a missing or broken
// interpreter.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTimer>

#include <iostream>

#include "builtin/pythontool.h"
#include "builtin_test_support.h"

namespace neural::toolhost {
namespace {

using test::runCall;
using Status = ToolOutcome::Status;

class PythonTool : public ::testing::Test {
protected:
    void SetUp() override {
        test::ensureApp();
        QString why;
        if (PythonProvider::findInterpreter({}, &why).isEmpty()) {
            if (test::underWine()) GTEST_SKIP() << "no Python under Wine";
            FAIL() << "no Python 3 on this machine (scripts/setup.sh installs python3): "
                   << why.toStdString();
        }
        ASSERT_TRUE(m_dir.isValid());
    }

    PythonToolSettings settings() const {
        PythonToolSettings s;
        s.workDir = m_dir.filePath(QStringLiteral("scratch"));
        return s;
    }

    QTemporaryDir m_dir;
};

TEST_F(PythonTool, DeclaresTheBuiltInNamespace) {
    PythonProvider provider(settings());
    EXPECT_TRUE(provider.ready()) << provider.problem().toStdString();
    EXPECT_TRUE(provider.problem().isEmpty());
    EXPECT_EQ(provider.name(), QStringLiteral("python"));
    EXPECT_TRUE(provider.inSystemMessage());
    EXPECT_EQ(provider.toolNamespace().name, "python");
    EXPECT_EQ(provider.toolNamespace().description, chat::ToolNamespace::python().description);
    EXPECT_TRUE(QFileInfo(provider.interpreter()).isAbsolute());
}

TEST_F(PythonTool, KeepsStateAcrossCalls) {
    PythonProvider provider(settings());
    ToolOutcome first =
        runCall(provider, {}, QStringLiteral("x = 21\ndef twice(v):\n    return 2 * v"));
    EXPECT_EQ(first.status, Status::ok) << first.text.toStdString();
    // No output: the reference tool's warning.
    EXPECT_EQ(first.text, QStringLiteral("[WARN] No output available. Use print() to output "
                                         "anything to stdout to receive the output"));
    ToolOutcome second = runCall(provider, {}, QStringLiteral("print(twice(x))"));
    EXPECT_EQ(second.status, Status::ok);
    EXPECT_EQ(second.text, QStringLiteral("42\n"));
    // As in a notebook, a final expression's value is shown.
    ToolOutcome third = runCall(provider, {}, QStringLiteral("import math\nmath.sqrt(x * 4 * 21)"));
    EXPECT_EQ(third.text, QStringLiteral("42.0\n"));
}

TEST_F(PythonTool, StdoutComesBeforeStderr) {
    PythonProvider provider(settings());
    ToolOutcome outcome = runCall(
        provider, {},
        QStringLiteral("import sys\nprint('to stderr', file=sys.stderr)\nprint('to stdout')\n"));
    EXPECT_EQ(outcome.status, Status::ok);
    EXPECT_EQ(outcome.text, QStringLiteral("to stdout\nto stderr\n"));
}

TEST_F(PythonTool, AnExceptionIsAToolErrorWithItsTraceback) {
    PythonProvider provider(settings());
    ToolOutcome outcome =
        runCall(provider, {}, QStringLiteral("print('before')\nvalues = [1, 2]\nvalues[5]"));
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_TRUE(
        outcome.text.startsWith(QStringLiteral("before\nTraceback (most recent call last):")))
        << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("IndexError: list index out of range")));
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("line 3")));
    EXPECT_FALSE(outcome.text.contains(QStringLiteral("neural-driver")))
        << "the driver's own frames are left out";
    EXPECT_FALSE(outcome.detail.isEmpty());

    ToolOutcome syntax = runCall(provider, {}, QStringLiteral("def broken(:\n    pass"));
    EXPECT_EQ(syntax.status, Status::toolError);
    EXPECT_TRUE(syntax.text.contains(QStringLiteral("SyntaxError"))) << syntax.text.toStdString();
    EXPECT_FALSE(syntax.text.contains(QStringLiteral("ast.py")));
    // The session survived both.
    EXPECT_EQ(runCall(provider, {}, QStringLiteral("print(values)")).text,
              QStringLiteral("[1, 2]\n"));
}

TEST_F(PythonTool, ATimeoutKillsTheCodeAndTheNextCallStartsFresh) {
    PythonToolSettings s = settings();
    s.timeoutMs = 1500;
    PythonProvider provider(s);
    ASSERT_EQ(runCall(provider, {}, QStringLiteral("kept = 1")).status, Status::ok);
    qint64 elapsed = 0;
    ToolOutcome outcome =
        runCall(provider, {}, QStringLiteral("while True:\n    pass"), {}, {}, &elapsed);
    EXPECT_EQ(outcome.status, Status::timedOut);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("time limit of 1.5 s")))
        << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("state")) ||
                outcome.text.contains(QStringLiteral("gone")));
    EXPECT_LT(elapsed, 10'000);

    ToolOutcome next = runCall(provider, {}, QStringLiteral("print('kept' in globals())"));
    EXPECT_EQ(next.status, Status::ok);
    EXPECT_TRUE(next.text.startsWith(QStringLiteral("[The Python session was restarted")))
        << next.text.toStdString();
    EXPECT_TRUE(next.text.endsWith(QStringLiteral("False\n")));
}

TEST_F(PythonTool, TheCallsTimeLimitCanBeShorterThanTheSettings) {
    PythonProvider provider(settings());
    CallLimits limits;
    limits.timeoutMs = 1000;
    qint64 elapsed = 0;
    ToolOutcome outcome =
        runCall(provider, {}, QStringLiteral("import time\ntime.sleep(20)"), limits, {}, &elapsed);
    EXPECT_EQ(outcome.status, Status::timedOut);
    EXPECT_LT(elapsed, 10'000);
}

TEST_F(PythonTool, TheMemoryLimitGivesAClearError) {
    PythonToolSettings s = settings();
    s.memoryBytes = qint64(512) << 20;
    PythonProvider provider(s);
    ToolOutcome outcome =
        runCall(provider, {}, QStringLiteral("block = bytearray(2 * 1024 * 1024 * 1024)"));
    EXPECT_EQ(outcome.status, Status::toolError) << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("MemoryError")));
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("memory limit")))
        << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("512 MiB")));
    // Well under the limit still works, in the same session.
    EXPECT_EQ(runCall(provider, {}, QStringLiteral("print(len(bytearray(64 * 1024 * 1024)))")).text,
              QStringLiteral("67108864\n"));
}

// Connects to a server of this test on loopback: refused without network, allowed with it.
QString connectCode(quint16 port) {
    return QStringLiteral(
               "import socket\n"
               "try:\n"
               "    socket.create_connection(('127.0.0.1', %1), timeout=3).close()\n"
               "    print('connected')\n"
               "except OSError as error:\n"
               "    print('refused:', type(error).__name__)\n")
        .arg(port);
}

TEST_F(PythonTool, HasNoNetwork) {
    QTcpServer server;
    ASSERT_TRUE(server.listen(QHostAddress::LocalHost, 0));
    PythonProvider provider(settings());
    ToolOutcome outcome = runCall(provider, {}, connectCode(server.serverPort()));
    EXPECT_EQ(outcome.status, Status::ok) << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.startsWith(QStringLiteral("refused:"))) << outcome.text.toStdString();
    test::spinFor(100);
    EXPECT_FALSE(server.hasPendingConnections());
    // Which mechanism kept it off the network (docs/TOOLS.md "Built-in tools").
    std::cout << "[ network mode: " << provider.networkMode().toStdString() << " ]\n";
    RecordProperty("network_mode", provider.networkMode().toStdString());
#ifdef Q_OS_LINUX
    EXPECT_TRUE(provider.networkMode() == QStringLiteral("namespace") ||
                provider.networkMode() == QStringLiteral("python"));
    if (provider.networkMode() == QStringLiteral("namespace")) {
        // In the empty namespace even a socket Python does not see is off the network.
        ToolOutcome raw = runCall(
            provider, {},
            QStringLiteral("import subprocess, sys\n"
                           "r = subprocess.run([sys.executable, '-c', %1], capture_output=True, "
                           "text=True)\nprint(r.stdout.strip())")
                .arg(QStringLiteral("'''%1'''").arg(connectCode(server.serverPort()))));
        EXPECT_TRUE(raw.text.startsWith(QStringLiteral("refused:"))) << raw.text.toStdString();
    }
#else
    EXPECT_EQ(provider.networkMode(), QStringLiteral("python"));
#endif
}

TEST_F(PythonTool, NetworkCanBeAllowed) {
    QTcpServer server;
    ASSERT_TRUE(server.listen(QHostAddress::LocalHost, 0));
    PythonToolSettings s = settings();
    s.allowNetwork = true;
    PythonProvider provider(s);
    ToolOutcome outcome = runCall(provider, {}, connectCode(server.serverPort()));
    EXPECT_EQ(outcome.text, QStringLiteral("connected\n"));
    EXPECT_EQ(provider.networkMode(), QStringLiteral("allowed"));
}

TEST_F(PythonTool, RunsInItsWorkingFolder) {
    PythonToolSettings s = settings();
    s.workDir = m_dir.filePath(QStringLiteral("conversation/scratch"));  // created on demand
    PythonProvider provider(s);
    EXPECT_EQ(provider.workDir(), s.workDir);
    ToolOutcome outcome =
        runCall(provider, {},
                QStringLiteral(
                    "import os\nopen('result.txt', 'w').write('6 * 7 = 42')\nprint(os.getcwd())"));
    EXPECT_EQ(outcome.status, Status::ok) << outcome.text.toStdString();
    EXPECT_EQ(QFileInfo(outcome.text.trimmed()).canonicalFilePath(),
              QFileInfo(s.workDir).canonicalFilePath());
    QFile file(QDir(s.workDir).filePath(QStringLiteral("result.txt")));
    ASSERT_TRUE(file.open(QIODevice::ReadOnly));
    EXPECT_EQ(file.readAll(), QByteArray("6 * 7 = 42"));
}

TEST_F(PythonTool, CancelStopsTheCodeAndRestartsTheSession) {
    PythonProvider provider(settings());
    ASSERT_EQ(runCall(provider, {}, QStringLiteral("kept = 1")).status, Status::ok);
    qint64 elapsed = 0;
    ToolOutcome outcome = runCall(
        provider, {}, QStringLiteral("import time\ntime.sleep(60)"), {},
        [](ToolCall* call) { QTimer::singleShot(500, call, [call] { call->cancel(); }); },
        &elapsed);
    EXPECT_EQ(outcome.status, Status::cancelled);
    EXPECT_LT(elapsed, 10'000);
    ToolOutcome next = runCall(provider, {}, QStringLiteral("print('kept' in globals())"));
    EXPECT_TRUE(next.text.endsWith(QStringLiteral("False\n"))) << next.text.toStdString();
}

TEST_F(PythonTool, RestartOnDemandClearsTheState) {
    PythonProvider provider(settings());
    ASSERT_EQ(runCall(provider, {}, QStringLiteral("kept = 1")).status, Status::ok);
    provider.restart();
    ToolOutcome next = runCall(provider, {}, QStringLiteral("kept"));
    EXPECT_EQ(next.status, Status::toolError);
    EXPECT_TRUE(next.text.startsWith(QStringLiteral("[The Python session was restarted")));
    EXPECT_TRUE(next.text.contains(QStringLiteral("NameError")));
}

TEST_F(PythonTool, OneCallAtATime) {
    PythonProvider provider(settings());
    ToolCall* first = provider.call({}, QStringLiteral("import time\ntime.sleep(1)\nprint(1)"), {});
    ToolOutcome firstOutcome;
    bool firstDone = false;
    QObject::connect(first, &ToolCall::finished, first, [&](const ToolOutcome& o) {
        firstOutcome = o;
        firstDone = true;
    });
    ToolOutcome second = runCall(provider, {}, QStringLiteral("print(2)"));
    EXPECT_EQ(second.status, Status::failed);
    EXPECT_TRUE(second.text.contains(QStringLiteral("another call")));
    ASSERT_TRUE(test::spinUntil([&] { return firstDone; }));
    EXPECT_EQ(firstOutcome.text, QStringLiteral("1\n"));
    delete first;
}

TEST_F(PythonTool, AnOversizedOutputIsCutWithANote) {
    PythonProvider provider(settings());
    CallLimits limits;
    limits.maxResultBytes = 1000;
    ToolOutcome outcome = runCall(provider, {}, QStringLiteral("print('a' * 500000)"), limits);
    EXPECT_EQ(outcome.status, Status::ok);
    EXPECT_TRUE(outcome.truncated);
    EXPECT_GE(outcome.fullBytes, 500000);
    EXPECT_LT(outcome.text.size(), 1200);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("left out"))) << outcome.text.toStdString();
}

TEST_F(PythonTool, ACallToAFunctionOfPythonFails) {
    PythonProvider provider(settings());
    ToolOutcome outcome = runCall(provider, QStringLiteral("exec"), QStringLiteral("print(1)"));
    EXPECT_EQ(outcome.status, Status::failed);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("no function")));
}

TEST_F(PythonTool, TheCodeEndingTheInterpreterIsReportedAndTheSessionRestarts) {
    PythonProvider provider(settings());
    ToolOutcome outcome =
        runCall(provider, {}, QStringLiteral("import os\nprint('bye', flush=True)\nos._exit(3)"));
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("exited with code 3")))
        << outcome.text.toStdString();
    EXPECT_EQ(runCall(provider, {}, QStringLiteral("print(7)")).status, Status::ok);
}

TEST(PythonToolSetup, AMissingInterpreterSaysHowToGetOne) {
    test::ensureApp();
    QString why;
    EXPECT_TRUE(
        PythonProvider::findInterpreter(QStringLiteral("/no/such/python3"), &why).isEmpty());
    EXPECT_TRUE(why.contains(QStringLiteral("not found"))) << why.toStdString();
    EXPECT_TRUE(why.contains(QStringLiteral("Install"))) << why.toStdString();

    PythonToolSettings settings;
    settings.interpreter = QStringLiteral("no-such-python-interpreter");
    PythonProvider provider(settings);
    EXPECT_FALSE(provider.ready());
    EXPECT_TRUE(provider.problem().contains(QStringLiteral("no-such-python-interpreter")));
    ToolOutcome outcome = runCall(provider, {}, QStringLiteral("print(1)"));
    EXPECT_EQ(outcome.status, Status::failed);
    EXPECT_EQ(outcome.text, provider.problem());
}

#ifdef Q_OS_LINUX
// An interpreter that answers the check but exits when the session starts.
TEST_F(PythonTool, AnInterpreterThatExitsAtStartIsAClearError) {
    const QString python = PythonProvider::findInterpreter({}, nullptr);
    const QString wrapper = m_dir.filePath(QStringLiteral("broken-python"));
    QFile script(wrapper);
    ASSERT_TRUE(script.open(QIODevice::WriteOnly));
    script.write(
        QStringLiteral("#!/bin/sh\n"
                       "if [ \"$1\" = -u ]; then echo 'fatal: broken install' >&2; exit 3; fi\n"
                       "exec '%1' \"$@\"\n")
            .arg(python)
            .toUtf8());
    script.close();
    script.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    QString why;
    // A configured interpreter is used as given.
    EXPECT_EQ(PythonProvider::findInterpreter(wrapper, &why), wrapper) << why.toStdString();
    PythonToolSettings s = settings();
    s.interpreter = wrapper;
    PythonProvider provider(s);
    ASSERT_TRUE(provider.ready()) << provider.problem().toStdString();
    ToolOutcome outcome = runCall(provider, {}, QStringLiteral("print(1)"));
    EXPECT_EQ(outcome.status, Status::failed);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("exited with code 3 at start")))
        << outcome.text.toStdString();
    EXPECT_TRUE(outcome.detail.contains(QStringLiteral("broken install")));
}
#endif

}  // namespace
}  // namespace neural::toolhost
