// The desktop window as the GUI tests open and drive it: its options (a private database and
// profiles, no first-run question, no tray), showing it until its model is loaded, and waiting
// for a reply.
#pragma once

#include <QString>
#include <QTemporaryDir>

#include <memory>

#include <gtest/gtest.h>

#include "app/mainwindow.h"
#include "common/paths.h"
#include "conversation/chatinput.h"
#include "conversation/enginehost.h"
#include "conversation/messagemodel.h"
#include "gui_test_support.h"
#include "support/fixtures.h"

namespace neural::gui::test {

// The fixture model's folder (tests/fixtures' tiny gpt-oss).
inline QString fixtureDir() {
    return QString::fromStdString(neural::test::tiny_model_dir().string());
}

// The window's options for a test: its database and profiles (profiles.json, which a test may
// write first) in `dir`, no first-run question, no tray. `modelDir`: the model it loads; empty,
// the active profile's, or the demo model where there is none.
inline MainWindow::Options windowOptions(const QTemporaryDir& dir, const QString& modelDir = {}) {
    MainWindow::Options o;
    o.modelDir = modelDir;
    o.dbPath = dir.filePath(QStringLiteral("conversations.sqlite"));
    o.profilesPath = dir.filePath(QStringLiteral("profiles.json"));
    o.askFirstRun = false;
    o.useTray = false;
    return o;
}

// The same on the fixture model.
inline MainWindow::Options fixtureWindowOptions(const QTemporaryDir& dir) {
    return windowOptions(dir, fixtureDir());
}

// Shows the window and waits (up to `ms`) until its model is loaded; fails with the engine's
// error.
inline ::testing::AssertionResult showUntilReady(MainWindow& window, int ms = 30000) {
    window.show();
    if (spinUntil([&] { return window.engine()->state() == EngineHost::State::ready; }, ms))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << window.engine()->lastError().toStdString();
}

// Opens the window with every reply forced to "A short reply." (the fixture's weights are
// random), shows it and waits until its model is loaded.
inline void openFixtureWindow(std::unique_ptr<MainWindow>& window,
                              const MainWindow::Options& options) {
    window = std::make_unique<MainWindow>(options);
    window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|end|>"));
    ASSERT_TRUE(showUntilReady(*window));
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

// The window tests' fixture: fresh app settings with a reply limit of `maxTokens` tokens (the
// fixture's random weights ramble), the window on the fixture model opened before each test and
// closed after it. open() after m_window.reset() opens it again on the same files, as after a
// restart of the app.
class WindowTest : public ::testing::Test {
protected:
    explicit WindowTest(int maxTokens) : m_maxTokens(maxTokens) {}
    void SetUp() override {
        appSettings()->clear();
        appSettings()->setValue(QStringLiteral("chat/maxTokens"), m_maxTokens);
        open();
    }
    void TearDown() override { m_window.reset(); }
    MainWindow::Options options() const { return fixtureWindowOptions(m_dir); }
    void open() { openFixtureWindow(m_window, options()); }
    bool idle() { return waitIdle(*m_window); }
    bool send(const QString& text) { return sendAndWait(*m_window, text); }

    QTemporaryDir m_dir;
    std::unique_ptr<MainWindow> m_window;

private:
    int m_maxTokens;
};

}  // namespace neural::gui::test
