// The context meter under the message box: the tokens the next turn's prompt takes (the
// conversation as it will be rendered, the system prompt and the message being typed with its
// attachments) of the model's context, counted with the loaded tokenizer 300 ms after the last
// change and again after each reply. When the prompt and the reply's token limit no longer fit
// the context, a warning under it names the ways out: a new conversation, a branch from an
// earlier message (which starts a new conversation with the messages up to it), or a shorter
// message.
#pragma once

#include <QTimer>
#include <QWidget>

#include <functional>

#include "conversation/enginehost.h"

class QLabel;

namespace neural::gui {

class ContextMeter : public QWidget {
    Q_OBJECT
public:
    // `request`: what the next turn would send now (called on each count).
    ContextMeter(EngineHost* engine, std::function<TurnRequest()> request,
                 QWidget* parent = nullptr);

    // Counts again 300 ms after the last call (typing); refresh() counts now.
    void schedule();
    void refresh();

    // The last count: tokens of the prompt (-1: no model), the model's context, the reply's limit.
    qint64 usedTokens() const { return m_used; }
    qint64 contextTokens() const { return m_context; }
    int replyLimit() const { return m_replyLimit; }
    // The prompt and the reply's limit together exceed the context: the next turn is refused.
    bool overflows() const;
    QLabel* label() const { return m_label; }
    QLabel* warning() const { return m_warning; }
    // Debounce delay of schedule() in ms.
    static constexpr int kDelayMs = 300;

signals:
    // The warning's links.
    void newConversationRequested();
    void branchRequested();
    void counted();  // after each count

private:
    EngineHost* m_engine;
    std::function<TurnRequest()> m_request;
    QTimer m_timer;
    QLabel* m_label;
    QLabel* m_warning;
    qint64 m_used = -1;
    qint64 m_context = 0;
    int m_replyLimit = 0;
};

}  // namespace neural::gui
