// gpt-oss's built-in `python` tool (docs/TOOLS.md "Built-in tools"): a stateful Python session in
// a separate process, one per conversation. The model addresses recipient `python` with its code
// as the message; the answer is what the reference tool returns (stdout, then stderr and the
// traceback). The interpreter is the user's own (found on PATH or configured); the session runs a
// small driver (python_driver.py) that keeps one namespace across calls. Limits: a time limit
// per call (the session is killed and restarted past it), a memory limit, no network and a
// scratch working folder; what each OS enforces is in docs/TOOLS.md.
#pragma once

#include <QByteArray>
#include <QElapsedTimer>
#include <QPointer>
#include <QProcess>
#include <QString>

#include "tool.h"

class QTimer;

namespace neural::toolhost {

struct PythonToolSettings {
    // Empty: found on PATH (python3, python; on Windows python.exe, then py.exe -3).
    QString interpreter;
    QString workDir;  // the conversation's scratch folder (created if missing)
    int timeoutMs = 30000;
    qint64 memoryBytes = qint64(1) << 30;
    bool allowNetwork = false;
};

class PythonCall;

class PythonProvider : public ToolProvider {
    Q_OBJECT
public:
    explicit PythonProvider(PythonToolSettings settings, QObject* parent = nullptr);
    ~PythonProvider() override;

    QString name() const override { return QStringLiteral("python"); }
    bool inSystemMessage() const override { return true; }
    chat::ToolNamespace toolNamespace() const override;
    bool ready() const override { return !m_interpreter.isEmpty(); }
    QString problem() const override { return m_problem; }
    // `tool` must be empty (python has no functions); `arguments` is the code.
    ToolCall* call(const QString& tool, const QString& arguments,
                   const CallLimits& limits) override;

    // Ends the session (a running call finishes cancelled); the next call starts a fresh one.
    void restart();
    QString workDir() const { return m_settings.workDir; }
    // The interpreter the session runs: the configured one, or the real executable of the one
    // found on PATH (python.exe behind py.exe).
    QString interpreter() const { return m_interpreter; }
    // How the running (or last) session is kept off the network: "namespace" (Linux: an empty
    // network namespace), "python" (sockets refused inside Python only: not a security boundary),
    // "allowed" (the settings allow it), empty before the first session started.
    QString networkMode() const { return m_networkMode; }

    // The interpreter to use: `configured` (a path or a name on PATH) or, when empty, the first
    // working Python 3 on PATH; checked by running it. Empty when none, with `why` saying how to
    // get one.
    static QString findInterpreter(const QString& configured, QString* why);

private:
    friend class PythonCall;
    void startCall(PythonCall* call);
    void startSession();
    void sendCode();
    void readProtocol();
    void handleMessage(const QByteArray& json);
    void onProcessFinished(int exitCode, QProcess::ExitStatus status);
    void onCallTimeout();
    void cancelCall(PythonCall* call);
    // Kills the session's process (and on Windows its job); `note` is what the next call's
    // output starts with when the killed session had state.
    void killSession(const QString& note);
    void finishCall(ToolOutcome outcome);
    void applyLimitsAfterStart();
    int callTimeoutMs() const;

    PythonToolSettings m_settings;
    QString m_interpreter;
    QString m_problem;
    QString m_networkMode;

    QProcess* m_process = nullptr;
    bool m_helloSeen = false;
    int m_cellsRun = 0;           // code blocks the current session ran
    QString m_restartNote;        // starts the next call's output after a lost session
    QByteArray m_protocolBuffer;  // the driver's stdout, not yet parsed
    QByteArray m_rawOutput;       // the process's stderr during the current call
    qint64 m_rawDropped = 0;
    QTimer* m_timer = nullptr;
    QElapsedTimer m_elapsed;

    QPointer<PythonCall> m_call;  // the running call (one at a time)
    QString m_code;
    CallLimits m_limits;

#ifdef Q_OS_WIN
    void* m_job = nullptr;  // the Job Object that holds the session (HANDLE)
#endif
#ifdef Q_OS_LINUX
    int m_namespacePipe[2] = {-1, -1};  // the child reports whether unshare() worked
#endif
};

// One python call; finished by its provider.
class PythonCall : public ToolCall {
    Q_OBJECT
public:
    explicit PythonCall(PythonProvider* provider);
    void cancel() override;

private:
    friend class PythonProvider;
    void finish(const ToolOutcome& outcome);
    QPointer<PythonProvider> m_provider;
    bool m_done = false;
};

}  // namespace neural::toolhost
