// The crash test's victim: appends "message N" (N = 0, 1, ...) to conversation 1 of DB, one
// committed transaction each, printing "committed N" after each commit, and between messages
// holds a "reply being generated" in memory for a moment, like the app. Runs until killed.
//   gui_store_crash_helper DB
#include <QCoreApplication>
#include <QThread>

#include <cstdio>

#include "conversation/conversationstore.h"

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    if (argc != 2) {
        std::fprintf(stderr, "usage: gui_store_crash_helper DB\n");
        return 2;
    }
    neural::gui::ConversationStore store;
    if (!store.open(QString::fromLocal8Bit(argv[1]))) {
        std::fprintf(stderr, "%s\n", qPrintable(store.lastError()));
        return 1;
    }
    const qint64 conv = store.createConversation(QStringLiteral("crash test"));
    for (int n = 0;; ++n) {
        QString generating;  // the reply being generated: memory only until complete
        for (int t = 0; t < 20; ++t) generating += QStringLiteral("tok%1 ").arg(t);
        const auto m =
            store.appendMessage(conv, n % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                                QStringLiteral("message %1").arg(n), generating);
        if (m.id == 0) {
            std::fprintf(stderr, "%s\n", qPrintable(store.lastError()));
            return 1;
        }
        std::printf("committed %d\n", n);
        std::fflush(stdout);
    }
}
