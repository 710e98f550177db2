// A tool call in the conversation (docs/DESKTOP.md "Tools"): the namespace (MCP server, python,
// browser), the tool and its arguments pretty-printed; Run / Deny / Always allow while it waits
// for the user, a progress bar and Cancel while it runs, then how it ended (done, the tool's
// error, failed, timed out, cancelled, denied, a result cut to the size limit) and the result
// the model read, collapsed under the card.
//
// The card shows a tool message's stats["tool"] object (ToolCall JSON, below); MainWindow owns
// the state and acts on the card's signals.
#pragma once

#include <QFrame>
#include <QJsonObject>

class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QToolButton;

namespace neural::gui {

// The keys of a tool message's stats["tool"]: recipient, channel, content_type, arguments,
// preamble (the model's note before the call), status (pending, running, ok, tool_error, failed,
// timed_out, cancelled, denied, unavailable, limit), detail, truncated, full_bytes, seconds, auto
// (always allowed), and while it runs progress (0..1, or negative) and progress_message.
namespace toolkey {
inline constexpr char kTool[] = "tool";
}

class ToolCard : public QFrame {
    Q_OBJECT
public:
    explicit ToolCard(QWidget* parent = nullptr);
    // `call`: the stats["tool"] object; `result`: the text the model read.
    void setCall(const QJsonObject& call, const QString& result);

    QLabel* titleLabel() const { return m_title; }
    QLabel* preambleLabel() const { return m_preamble; }
    QLabel* argumentsLabel() const { return m_arguments; }
    QLabel* stateLabel() const { return m_state; }
    QPushButton* runButton() const { return m_run; }
    QPushButton* denyButton() const { return m_deny; }
    QPushButton* alwaysButton() const { return m_always; }
    QPushButton* cancelButton() const { return m_cancel; }
    QProgressBar* progressBar() const { return m_progress; }
    QToolButton* resultToggle() const { return m_resultToggle; }
    QPlainTextEdit* resultView() const { return m_result; }

    // The one line a status reads as ("Denied: ...").
    static QString stateText(const QJsonObject& call);

signals:
    void runRequested();
    void denyRequested();
    void alwaysAllowRequested();
    void cancelRequested();

private:
    QLabel* m_preamble;
    QLabel* m_title;
    QLabel* m_arguments;
    QLabel* m_state;
    QProgressBar* m_progress;
    QPushButton* m_run;
    QPushButton* m_deny;
    QPushButton* m_always;
    QPushButton* m_cancel;
    QToolButton* m_resultToggle;
    QPlainTextEdit* m_result;
};

}  // namespace neural::gui
