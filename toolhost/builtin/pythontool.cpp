#include "builtin/pythontool.h"

#include <algorithm>

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QStandardPaths>
#include <QTimer>

#include "python_driver.h"

#ifdef Q_OS_LINUX
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>
#endif

#ifdef Q_OS_WIN
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif

namespace neural::toolhost {
namespace {

// Starting an interpreter (and the driver's imports) takes well under a second; antivirus
// scanners on Windows can stretch that to seconds.
constexpr int kStartTimeoutMs = 30'000;
// Raw output (subprocesses, C extensions) kept per call, beyond what the driver captures.
constexpr qint64 kRawOutputCap = 1 << 20;
// Windows: processes the session may have at once (the interpreter and its subprocesses).
[[maybe_unused]] constexpr int kMaxProcesses = 16;
#ifdef Q_OS_LINUX
// CPU seconds of a whole session (RLIMIT_CPU), a backstop behind the wall-clock limit for a
// process its host no longer watches.
constexpr rlim_t kSessionCpuSeconds = 3600;
#endif

// Reads the one JSON line the driver needs and runs it (python_driver.py's header).
const char kBootstrap[] =
    "import sys,json;c=json.loads(sys.stdin.buffer.readline().decode('utf-8'));"
    "exec(compile(c['driver'],'<neural-driver>','exec'),"
    "{'__name__':'__neural_driver__','NEURAL_CONFIG':c})";

const QString kNoOutput = QStringLiteral(
    "[WARN] No output available. Use print() to output anything to stdout to receive the output");

QString stateLost() {
    return QStringLiteral(
        "The Python session was restarted: variables, imports and definitions from earlier calls "
        "are gone.");
}

QString sizeText(qint64 bytes) {
    if (bytes % (qint64(1) << 30) == 0) return QStringLiteral("%1 GiB").arg(bytes >> 30);
    return QStringLiteral("%1 MiB").arg(bytes >> 20);
}

QString secondsText(int ms) {
    if (ms % 1000 == 0) return QStringLiteral("%1 s").arg(ms / 1000);
    return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'f', 1);
}

QString rstrip(QString text) {
    while (!text.isEmpty() && text.back().isSpace()) text.chop(1);
    return text;
}

QString howToGetPython() {
#ifdef Q_OS_WIN
    return QStringLiteral(
        "Install Python 3 from https://www.python.org/downloads/ (tick \"Add python.exe to "
        "PATH\") or with `winget install Python.Python.3.12`, or choose the interpreter in "
        "Settings > Tools.");
#else
    return QStringLiteral(
        "Install Python 3 (Debian/Ubuntu: `sudo apt install python3`; Fedora: `sudo dnf install "
        "python3`) or choose the interpreter in Settings > Tools.");
#endif
}

// Runs `program` to learn its version and real executable. Empty on success, else why not.
QString probeInterpreter(const QString& program, const QStringList& leadingArgs,
                         QString* executable) {
    QProcess probe;
    probe.setProgram(program);
    probe.setArguments(leadingArgs +
                       QStringList{QStringLiteral("-c"),
                                   QStringLiteral("import sys;print('%d %d' % "
                                                  "sys.version_info[:2]);print(sys.executable)")});
    probe.start();
    if (!probe.waitForStarted(10'000)) return probe.errorString();
    if (!probe.waitForFinished(20'000)) {
        probe.kill();
        probe.waitForFinished(2'000);
        return QStringLiteral("it did not answer within 20 s");
    }
    const QString out = QString::fromUtf8(probe.readAllStandardOutput());
    if (probe.exitStatus() != QProcess::NormalExit || probe.exitCode() != 0) {
        const QString err = QString::fromUtf8(probe.readAllStandardError()).trimmed().left(300);
        return QStringLiteral("it exited with code %1%2")
            .arg(probe.exitCode())
            .arg(err.isEmpty() ? QString() : QStringLiteral(": ") + err);
    }
    const QStringList lines = out.split(QLatin1Char('\n'));
    const QStringList version = lines.value(0).trimmed().split(QLatin1Char(' '));
    const int major = version.value(0).toInt();
    const int minor = version.value(1).toInt();
    if (major != 3 || minor < 7)
        return QStringLiteral("it is Python %1.%2; the tool needs Python 3.7 or newer")
            .arg(major)
            .arg(minor);
    const QString real = lines.value(1).trimmed();
    *executable = !real.isEmpty() && QFileInfo(real).isExecutable() ? real : program;
    return {};
}

#ifdef Q_OS_LINUX
// Fills a child's /proc/self/FILE with `text` (async-signal-safe: runs between fork and exec).
void writeProcFile(const char* path, const std::string& text) {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t ignored = ::write(fd, text.data(), text.size());
    (void)ignored;
    ::close(fd);
}
#endif

}  // namespace

// ---------------------------------------------------------------------------------------------

PythonCall::PythonCall(PythonProvider* provider) : ToolCall(nullptr), m_provider(provider) {}

void PythonCall::cancel() {
    if (m_done) return;
    if (m_provider && m_provider->m_call == this) {
        m_provider->cancelCall(this);
        return;
    }
    ToolOutcome outcome;
    outcome.status = ToolOutcome::Status::cancelled;
    outcome.text = QStringLiteral("The call was cancelled.");
    finish(outcome);
}

void PythonCall::finish(const ToolOutcome& outcome) {
    if (m_done) return;
    m_done = true;
    emit finished(outcome);
}

// ---------------------------------------------------------------------------------------------

QString PythonProvider::findInterpreter(const QString& configured, QString* why) {
    QString executable;
    if (!configured.isEmpty()) {
        QString program = configured;
        if (!QFileInfo(configured).isAbsolute() && !configured.contains(QLatin1Char('/')) &&
            !configured.contains(QLatin1Char('\\')))
            program = QStandardPaths::findExecutable(configured);
        if (program.isEmpty() || !QFileInfo(program).exists()) {
            if (why)
                *why = QStringLiteral("The configured Python interpreter \"%1\" was not found. %2")
                           .arg(configured, howToGetPython());
            return {};
        }
        // The user's choice is kept as given (a wrapper or a virtual environment's python).
        const QString error = probeInterpreter(program, {}, &executable);
        if (error.isEmpty()) return QFileInfo(program).absoluteFilePath();
        if (why)
            *why = QStringLiteral("The configured Python interpreter \"%1\" does not work: %2. %3")
                       .arg(configured, error, howToGetPython());
        return {};
    }

    struct Candidate {
        QString name;
        QStringList args;
    };
#ifdef Q_OS_WIN
    const Candidate candidates[] = {{QStringLiteral("python.exe"), {}},
                                    {QStringLiteral("py.exe"), {QStringLiteral("-3")}}};
#else
    const Candidate candidates[] = {{QStringLiteral("python3"), {}},
                                    {QStringLiteral("python"), {}}};
#endif
    QStringList tried;
    for (const Candidate& candidate : candidates) {
        const QString program = QStandardPaths::findExecutable(candidate.name);
        if (program.isEmpty()) continue;
        const QString error = probeInterpreter(program, candidate.args, &executable);
        if (error.isEmpty()) return executable;
        tried << QStringLiteral("%1 (%2)").arg(program, error);
    }
    if (why) {
        *why = tried.isEmpty()
                   ? QStringLiteral("No Python 3 interpreter was found on PATH. %1")
                         .arg(howToGetPython())
                   : QStringLiteral("No working Python 3 interpreter was found on PATH: %1. %2")
                         .arg(tried.join(QStringLiteral("; ")), howToGetPython());
    }
    return {};
}

PythonProvider::PythonProvider(PythonToolSettings settings, QObject* parent)
    : ToolProvider(parent), m_settings(std::move(settings)), m_timer(new QTimer(this)) {
    m_timer->setSingleShot(true);
    connect(m_timer, &QTimer::timeout, this, &PythonProvider::onCallTimeout);
    if (m_settings.workDir.isEmpty())
        m_settings.workDir = QDir(QDir::tempPath()).filePath(QStringLiteral("neural-python"));
    m_interpreter = findInterpreter(m_settings.interpreter, &m_problem);
}

PythonProvider::~PythonProvider() {
    if (m_call) {
        ToolOutcome outcome;
        outcome.status = ToolOutcome::Status::failed;
        outcome.text = QStringLiteral("The Python session was closed.");
        finishCall(outcome);
    }
    killSession({});
}

chat::ToolNamespace PythonProvider::toolNamespace() const { return chat::ToolNamespace::python(); }

ToolCall* PythonProvider::call(const QString& tool, const QString& arguments,
                               const CallLimits& limits) {
    auto* call = new PythonCall(this);
    QString refusal;
    if (!tool.isEmpty())
        refusal = QStringLiteral(
                      "python has no function \"%1\": send the code itself as the message to "
                      "python.")
                      .arg(tool);
    else if (!ready())
        refusal = m_problem;
    else if (m_call)
        refusal = QStringLiteral("The Python session is still running another call.");
    if (!refusal.isEmpty()) {
        ToolOutcome outcome;
        outcome.status = ToolOutcome::Status::failed;
        outcome.text = refusal;
        outcome.detail = refusal;
        QTimer::singleShot(0, call, [call, outcome] { call->finish(outcome); });
        return call;
    }
    m_call = call;
    m_code = arguments;
    m_limits = limits;
    QPointer<PythonCall> guard(call);
    QTimer::singleShot(0, this, [this, guard] {
        if (guard && m_call == guard) startCall(guard);
    });
    return call;
}

int PythonProvider::callTimeoutMs() const {
    int ms = m_settings.timeoutMs > 0 ? m_settings.timeoutMs : 30'000;
    if (m_limits.timeoutMs > 0) ms = std::min(ms, m_limits.timeoutMs);
    return ms;
}

void PythonProvider::startCall(PythonCall* call) {
    Q_UNUSED(call);
    if (m_process && m_helloSeen) {
        sendCode();
        return;
    }
    if (!m_process) startSession();
}

void PythonProvider::startSession() {
    if (!QDir().mkpath(m_settings.workDir)) {
        ToolOutcome outcome;
        outcome.status = ToolOutcome::Status::failed;
        outcome.text =
            QStringLiteral("Could not create the working folder %1.").arg(m_settings.workDir);
        outcome.detail = outcome.text;
        finishCall(outcome);
        return;
    }
    m_helloSeen = false;
    m_cellsRun = 0;
    m_protocolBuffer.clear();
    m_rawOutput.clear();
    m_rawDropped = 0;
    m_networkMode.clear();

    m_process = new QProcess(this);
    m_process->setProgram(m_interpreter);
    // -u: unbuffered; -X utf8: UTF-8 files and pipes on every OS.
    m_process->setArguments({QStringLiteral("-u"), QStringLiteral("-X"), QStringLiteral("utf8"),
                             QStringLiteral("-c"), QString::fromLatin1(kBootstrap)});
    m_process->setWorkingDirectory(m_settings.workDir);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("PYTHONIOENCODING"), QStringLiteral("utf-8"));
    env.insert(QStringLiteral("MPLBACKEND"), QStringLiteral("Agg"));  // plots go to files
    m_process->setProcessEnvironment(env);

#ifdef Q_OS_LINUX
    if (::pipe2(m_namespacePipe, O_CLOEXEC) != 0) m_namespacePipe[0] = m_namespacePipe[1] = -1;
    const int reportFd = m_namespacePipe[1];
    const bool isolate = !m_settings.allowNetwork;
    const rlim_t memory =
        m_settings.memoryBytes > 0 ? rlim_t(m_settings.memoryBytes) : RLIM_INFINITY;
    const std::string uidMap =
        std::to_string(::getuid()) + " " + std::to_string(::getuid()) + " 1\n";
    const std::string gidMap =
        std::to_string(::getgid()) + " " + std::to_string(::getgid()) + " 1\n";
    // Runs in the child between fork and exec: async-signal-safe calls only.
    m_process->setChildProcessModifier([reportFd, isolate, memory, uidMap, gidMap] {
        ::setpgid(0, 0);  // one group: a kill reaches subprocesses too
        const struct rlimit as { memory, memory };
        ::setrlimit(RLIMIT_AS, &as);
        const struct rlimit cpu { kSessionCpuSeconds, kSessionCpuSeconds };
        ::setrlimit(RLIMIT_CPU, &cpu);
        char isolated = '0';
        if (isolate && ::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
            isolated = '1';
            // Keep the user's own ids inside the new user namespace.
            writeProcFile("/proc/self/setgroups", "deny");
            writeProcFile("/proc/self/uid_map", uidMap);
            writeProcFile("/proc/self/gid_map", gidMap);
        }
        // Last: a change of credentials (the new user namespace) clears it.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the session dies with its host
        if (reportFd >= 0) {
            ssize_t ignored = ::write(reportFd, &isolated, 1);
            (void)ignored;
        }
    });
#endif

    connect(m_process, &QProcess::started, this, [this] {
#ifdef Q_OS_LINUX
        bool isolated = false;
        if (m_namespacePipe[0] >= 0) {
            pollfd fd{m_namespacePipe[0], POLLIN, 0};
            char byte = '0';
            if (::poll(&fd, 1, 5'000) == 1 && ::read(m_namespacePipe[0], &byte, 1) == 1)
                isolated = byte == '1';
            ::close(m_namespacePipe[0]);
            m_namespacePipe[0] = -1;
        }
        const QString mode = m_settings.allowNetwork ? QStringLiteral("allow")
                             : isolated              ? QStringLiteral("isolated")
                                                     : QStringLiteral("block");
#else
        const QString mode =
            m_settings.allowNetwork ? QStringLiteral("allow") : QStringLiteral("block");
#endif
        applyLimitsAfterStart();
        if (!m_process) return;
        QJsonObject config{{QStringLiteral("driver"), QString::fromUtf8(kPythonDriver)},
                           {QStringLiteral("network"), mode}};
        m_process->write(QJsonDocument(config).toJson(QJsonDocument::Compact) + '\n');
    });
    connect(m_process, &QProcess::readyReadStandardOutput, this, &PythonProvider::readProtocol);
    connect(m_process, &QProcess::readyReadStandardError, this, [this] {
        const QByteArray data = m_process->readAllStandardError();
        const qint64 room = kRawOutputCap - m_rawOutput.size();
        if (room >= data.size()) {
            m_rawOutput += data;
        } else {
            m_rawOutput += data.left(std::max<qint64>(room, 0));
            m_rawDropped += data.size() - std::max<qint64>(room, 0);
        }
    });
    connect(m_process, &QProcess::finished, this, &PythonProvider::onProcessFinished);
    connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
        if (error != QProcess::FailedToStart) return;
        const QString why = m_process->errorString();
        killSession({});
        ToolOutcome outcome;
        outcome.status = ToolOutcome::Status::failed;
        outcome.text =
            QStringLiteral("Could not start the Python interpreter %1: %2").arg(m_interpreter, why);
        outcome.detail = outcome.text;
        finishCall(outcome);
    });
    m_timer->start(kStartTimeoutMs);
    m_process->start();
#ifdef Q_OS_LINUX
    if (m_namespacePipe[1] >= 0) {
        ::close(m_namespacePipe[1]);
        m_namespacePipe[1] = -1;
    }
#endif
}

void PythonProvider::applyLimitsAfterStart() {
#ifdef Q_OS_WIN
    // The driver waits for its first stdin line before running anything, so the code never runs
    // outside the job.
    HANDLE job = CreateJobObjectW(nullptr, nullptr);
    QString error;
    if (!job) {
        error = QStringLiteral("CreateJobObject failed (error %1)").arg(GetLastError());
    } else {
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION info;
        ZeroMemory(&info, sizeof info);
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE |
                                                JOB_OBJECT_LIMIT_ACTIVE_PROCESS |
                                                JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
        info.BasicLimitInformation.ActiveProcessLimit = kMaxProcesses;
        if (m_settings.memoryBytes > 0) {
            info.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_PROCESS_MEMORY;
            info.ProcessMemoryLimit = SIZE_T(m_settings.memoryBytes);
        }
        HANDLE process = OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, FALSE,
                                     DWORD(m_process->processId()));
        if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation, &info, sizeof info))
            error = QStringLiteral("SetInformationJobObject failed (error %1)").arg(GetLastError());
        else if (!process)
            error = QStringLiteral("OpenProcess failed (error %1)").arg(GetLastError());
        else if (!AssignProcessToJobObject(job, process))
            error =
                QStringLiteral("AssignProcessToJobObject failed (error %1)").arg(GetLastError());
        if (process) CloseHandle(process);
    }
    if (error.isEmpty()) {
        m_job = job;
        return;
    }
    if (job) CloseHandle(job);
    killSession({});
    ToolOutcome outcome;
    outcome.status = ToolOutcome::Status::failed;
    outcome.text = QStringLiteral("Could not apply the Python session's limits: %1.").arg(error);
    outcome.detail = outcome.text;
    finishCall(outcome);
#endif
}

void PythonProvider::sendCode() {
    m_timer->stop();
    m_rawOutput.clear();
    m_rawDropped = 0;
    // Characters kept per stream: at least as many as the result may have bytes.
    const qint64 cap = std::max<qint64>(m_limits.maxResultBytes, 1024);
    const QJsonObject request{{QStringLiteral("code"), m_code},
                              {QStringLiteral("cap"), double(cap)}};
    const QByteArray json = QJsonDocument(request).toJson(QJsonDocument::Compact);
    m_process->write(QByteArray::number(json.size()) + '\n' + json);
    m_elapsed.start();
    m_timer->start(callTimeoutMs());
}

void PythonProvider::readProtocol() {
    if (!m_process) return;
    m_protocolBuffer += m_process->readAllStandardOutput();
    while (m_process) {
        const qsizetype newline = m_protocolBuffer.indexOf('\n');
        if (newline < 0) return;
        const QByteArray header = m_protocolBuffer.left(newline);
        bool ok = header.startsWith("NEURAL ");
        const qint64 size = ok ? header.mid(7).toLongLong(&ok) : 0;
        if (!ok || size < 0) {
            killSession(stateLost());
            ToolOutcome outcome;
            outcome.status = ToolOutcome::Status::failed;
            outcome.text = QStringLiteral("The Python session answered in an unknown form.");
            outcome.detail = QString::fromUtf8(m_protocolBuffer.left(500));
            finishCall(outcome);
            return;
        }
        if (m_protocolBuffer.size() < newline + 1 + size) return;
        const QByteArray json = m_protocolBuffer.mid(newline + 1, size);
        m_protocolBuffer.remove(0, newline + 1 + size);
        handleMessage(json);
    }
}

void PythonProvider::handleMessage(const QByteArray& json) {
    const QJsonObject message = QJsonDocument::fromJson(json).object();
    if (message.value(QStringLiteral("hello")).toBool()) {
        m_helloSeen = true;
        m_timer->stop();
        const QString network = message.value(QStringLiteral("network")).toString();
        if (network != m_networkMode) {
            m_networkMode = network;
            emit changed();
        }
        if (m_call) sendCode();
        return;
    }
    if (!m_call) return;
    ++m_cellsRun;
    m_timer->stop();

    const QString stdoutText = message.value(QStringLiteral("stdout")).toString();
    QString stderrText = message.value(QStringLiteral("stderr")).toString();
    // Output of subprocesses and C code that reached the process's own fds.
    stderrText += QString::fromUtf8(m_rawOutput);
    const QJsonValue error = message.value(QStringLiteral("error"));
    const QString errorType = message.value(QStringLiteral("error_type")).toString();
    if (error.isString()) stderrText += error.toString();

    // As the reference tool: stdout, then stderr (and the traceback) on the next line.
    QString text = stdoutText;
    if (!stderrText.isEmpty())
        text = text.isEmpty() ? stderrText : rstrip(text) + QLatin1Char('\n') + stderrText;
    if (errorType == QLatin1String("MemoryError") && m_settings.memoryBytes > 0)
        text = rstrip(text) + QStringLiteral(
                                  "\n[The code ran out of memory: the session's "
                                  "memory limit is %1.]")
                                  .arg(sizeText(m_settings.memoryBytes));
    if (text.trimmed().isEmpty()) text = kNoOutput;
    if (!m_restartNote.isEmpty()) {
        text = QStringLiteral("[%1]\n").arg(m_restartNote) + text;
        m_restartNote.clear();
    }

    ToolOutcome outcome;
    outcome.status = error.isString() ? ToolOutcome::Status::toolError : ToolOutcome::Status::ok;
    setResultText(outcome, text, m_limits.maxResultBytes);
    const qint64 dropped =
        qint64(message.value(QStringLiteral("dropped")).toDouble()) + m_rawDropped;
    if (dropped > 0) {
        // The session kept only the first part of a very long output.
        outcome.fullBytes += dropped;
        if (!outcome.truncated) {
            outcome.text +=
                QStringLiteral("\n[... %1 more characters of output were left out]").arg(dropped);
            outcome.truncated = true;
        }
    }
    if (error.isString()) outcome.detail = error.toString();
    finishCall(outcome);
}

void PythonProvider::onProcessFinished(int exitCode, QProcess::ExitStatus status) {
    const bool started = m_helloSeen;
    const bool hadState = m_cellsRun > 0;
    const QString raw = QString::fromUtf8(m_rawOutput + m_process->readAllStandardError());
    killSession({});
    if (!m_call) {
        // Ended between calls (it should not): the next call starts a fresh session.
        if (hadState) m_restartNote = stateLost();
        return;
    }
    const QString how = status == QProcess::CrashExit
                            ? QStringLiteral("crashed")
                            : QStringLiteral("exited with code %1").arg(exitCode);
    ToolOutcome outcome;
    if (!started) {
        outcome.status = ToolOutcome::Status::failed;
        outcome.text =
            QStringLiteral("The Python interpreter %1 %2 at start.").arg(m_interpreter, how);
        outcome.detail =
            raw.trimmed().isEmpty() ? outcome.text : outcome.text + QLatin1Char('\n') + raw;
        finishCall(outcome);
        return;
    }
    // The code ended the interpreter (os._exit, a crash in C code, a limit the OS enforced).
    QString text = raw;
    if (!text.isEmpty() && !text.endsWith(QLatin1Char('\n'))) text += QLatin1Char('\n');
    text += QStringLiteral("[The Python process %1 while running the code").arg(how);
    if (status == QProcess::CrashExit && m_settings.memoryBytes > 0)
        text += QStringLiteral(" (it may have gone over its memory limit of %1)")
                    .arg(sizeText(m_settings.memoryBytes));
    text += QStringLiteral(". %1]").arg(stateLost());
    outcome.status = ToolOutcome::Status::toolError;
    setResultText(outcome, text, m_limits.maxResultBytes);
    outcome.detail = text;
    finishCall(outcome);
}

void PythonProvider::onCallTimeout() {
    if (!m_call) return;
    ToolOutcome outcome;
    if (!m_helloSeen) {
        killSession({});
        outcome.status = ToolOutcome::Status::failed;
        outcome.text = QStringLiteral("The Python interpreter %1 did not start within %2.")
                           .arg(m_interpreter, secondsText(kStartTimeoutMs));
        outcome.detail = outcome.text;
        finishCall(outcome);
        return;
    }
    killSession({});
    outcome.status = ToolOutcome::Status::timedOut;
    outcome.text =
        QStringLiteral("The code ran longer than the time limit of %1 and was stopped. %2")
            .arg(secondsText(callTimeoutMs()), stateLost());
    outcome.detail = outcome.text;
    finishCall(outcome);
}

void PythonProvider::cancelCall(PythonCall* call) {
    if (m_call != call) return;
    const bool hadSession = m_process != nullptr;
    killSession({});
    ToolOutcome outcome;
    outcome.status = ToolOutcome::Status::cancelled;
    outcome.text = hadSession ? QStringLiteral("The call was cancelled. %1").arg(stateLost())
                              : QStringLiteral("The call was cancelled.");
    finishCall(outcome);
}

void PythonProvider::restart() {
    const bool hadState = m_cellsRun > 0;
    if (m_call) {
        killSession({});
        ToolOutcome outcome;
        outcome.status = ToolOutcome::Status::cancelled;
        outcome.text = QStringLiteral("The call was cancelled. %1").arg(stateLost());
        finishCall(outcome);
        return;
    }
    killSession(hadState ? stateLost() : QString());
}

void PythonProvider::killSession(const QString& note) {
    m_timer->stop();
    if (!note.isEmpty()) m_restartNote = note;
#ifdef Q_OS_LINUX
    for (int& fd : m_namespacePipe) {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
#endif
    if (!m_process) return;
    QProcess* process = m_process;
    m_process = nullptr;
    // A session killed while it held state (or ran code) loses it: the next call says so.
    if (m_helloSeen && (m_cellsRun > 0 || m_call)) m_restartNote = stateLost();
    m_helloSeen = false;
    m_cellsRun = 0;
    process->disconnect(this);
#ifdef Q_OS_WIN
    if (m_job) {
        TerminateJobObject(static_cast<HANDLE>(m_job), 1);
        CloseHandle(static_cast<HANDLE>(m_job));
        m_job = nullptr;
    }
#endif
#ifdef Q_OS_LINUX
    const qint64 pid = process->processId();
    if (pid > 0) ::kill(-pid_t(pid), SIGKILL);  // the session's process group
#endif
    if (process->state() != QProcess::NotRunning) {
        process->kill();
        process->waitForFinished(5'000);
    }
    process->deleteLater();
}

void PythonProvider::finishCall(ToolOutcome outcome) {
    m_timer->stop();
    QPointer<PythonCall> call = m_call;
    m_call = nullptr;
    m_code.clear();
    if (call) call->finish(outcome);
}

}  // namespace neural::toolhost
