// toolhost/: the tools the model can call (docs/TOOLS.md): MCP servers (mcp/) and gpt-oss's
// built-in python and browser tools (builtin/). Qt Core + Network, no Widgets: the desktop app
// asks the user before each call and shows it as a card; neural-server offers the built-ins only
// when its operator enables them (--tools). This header is the contract between the model's side
// (which renders a provider's namespace into the prompt and reads its calls from the reply) and
// the providers.
#pragma once

#include <QObject>
#include <QString>
#include <QtGlobal>

#include "chat/message.h"

namespace neural::toolhost {

// Limits of one call. The result the model reads is cut at maxResultBytes (on a UTF-8 boundary)
// with a note saying how much was left out.
struct CallLimits {
    int timeoutMs = 60'000;
    qint64 maxResultBytes = 64 * 1024;
};

// How a call ended, and what the model reads next (the tool message's content).
struct ToolOutcome {
    enum class Status {
        ok,         // the tool ran; `text` is its result
        toolError,  // the tool ran and reported an error (MCP isError, a Python exception): the
                    // model reads it and can react
        failed,     // the call could not be made or its answer was unusable (server crashed,
                    // malformed result, unknown tool, bad arguments): `detail` says why
        timedOut,
        cancelled,
        denied,  // the user said no (set by the desktop app, never by a provider)
    };
    Status status = Status::ok;
    QString text;    // the tool message the model reads (also for every status but ok: a short
                     // sentence such as "The call timed out after 60 s.")
    QString detail;  // for the user's card: the error in full, stderr, ...
    bool truncated = false;
    qint64 fullBytes = 0;  // the result's size before truncation
};

QString statusName(ToolOutcome::Status status);  // "ok", "tool_error", ...

// One running call. It emits finished exactly once (also after cancel()), then may be deleted
// (deleteLater) by whoever started it.
class ToolCall : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    // Stops the call; finished(cancelled) follows unless it already finished.
    virtual void cancel() = 0;

signals:
    // fraction in [0, 1], or negative when unknown; message may be empty.
    void progress(double fraction, const QString& message);
    void finished(const neural::toolhost::ToolOutcome& outcome);
};

// A source of tools: one harmony namespace ("python", "browser", or an MCP server's name).
class ToolProvider : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    // The namespace the model addresses: recipient "NAME.TOOL" (python: just "python").
    virtual QString name() const = 0;
    // True for gpt-oss's built-ins, which the system message declares; false for namespaces of
    // the developer message (MCP servers).
    virtual bool inSystemMessage() const = 0;
    // The namespace as the prompt renders it (chat/render.h). Empty tools until ready().
    virtual chat::ToolNamespace toolNamespace() const = 0;
    // Ready to take calls (an MCP server: started, initialized, tools listed).
    virtual bool ready() const = 0;
    // Why the provider is not ready ("python not found: ...", "server exited with code 1"),
    // empty when it is.
    virtual QString problem() const = 0;
    // Starts a call of `tool` (without the namespace; empty for python) with the model's
    // argument text (JSON, or python's code). Never null: a call that cannot start finishes
    // (queued, never inside this function) with failed.
    virtual ToolCall* call(const QString& tool, const QString& arguments,
                           const CallLimits& limits) = 0;

signals:
    // ready(), problem() or toolNamespace() changed.
    void changed();
};

// Cuts `text` to at most maxBytes of UTF-8 (never inside a character) and fills the outcome's
// text, truncated and fullBytes; a cut text ends with a note naming the bytes left out.
void setResultText(ToolOutcome& outcome, const QString& text, qint64 maxBytes);

}  // namespace neural::toolhost
