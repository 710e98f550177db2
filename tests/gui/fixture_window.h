// The desktop window on the fixture model, as the window tests open and drive it.
#pragma once

#include <QString>
#include <QTemporaryDir>

#include <memory>

#include <gtest/gtest.h>

#include "app/mainwindow.h"
#include "conversation/chatinput.h"
#include "conversation/enginehost.h"
#include "conversation/messagemodel.h"
#include "gui_test_support.h"
#include "support/fixtures.h"

namespace neural::gui::test {

// The fixture model, its database and profiles in `dir`, no first-run question, no tray.
inline MainWindow::Options fixtureWindowOptions(const QTemporaryDir& dir) {
    MainWindow::Options o;
    o.modelDir = QString::fromStdString(neural::test::tiny_model_dir().string());
    o.dbPath = dir.filePath(QStringLiteral("conversations.sqlite"));
    o.profilesPath = dir.filePath(QStringLiteral("profiles.json"));
    o.askFirstRun = false;
    o.useTray = false;
    return o;
}

// Opens the window with every reply forced to "A short reply." (the fixture's weights are
// random), shows it and waits until its model is loaded.
inline void openFixtureWindow(std::unique_ptr<MainWindow>& window,
                              const MainWindow::Options& options) {
    window = std::make_unique<MainWindow>(options);
    window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|end|>"));
    window->show();
    ASSERT_TRUE(spinUntil([&] { return window->engine()->state() == EngineHost::State::ready; }))
        << window->engine()->lastError().toStdString();
}

// Until no reply is being generated or streamed into the view.
inline bool waitIdle(const MainWindow& window) {
    return spinUntil([&] { return !window.engine()->busy() && !window.messages()->isStreaming(); });
}

// Types `text` into the message box, sends it and waits for the reply to end.
inline bool sendAndWait(MainWindow& window, const QString& text) {
    window.input()->setPlainText(text);
    window.sendMessage();
    return waitIdle(window);
}

}  // namespace neural::gui::test
