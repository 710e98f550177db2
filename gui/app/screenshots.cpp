#include "app/screenshots.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QPainter>
#include <QTimer>

#include <functional>
#include <memory>

#include <spdlog/spdlog.h>

#include "app/mainwindow.h"
#include "benchmark/benchmarkdialog.h"
#include "conversation/assistants.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/contextmeter.h"
#include "conversation/messagemodel.h"
#include "conversation/settingspanel.h"
#include "monitor/telemetrydock.h"
#include "settings/appsettingsdialog.h"
#include "settings/profiledialog.h"
#include "wizard/setupwizard.h"

namespace neural::gui {

namespace {
bool screenshotsFailed = false;
// The Continue scene's question (short, so the branch's title shows whole in the list).
const char* const kContinueQuestion = "Python venv on Windows?";

void save(QWidget* w, const QString& path) {
    w->grab().save(path);
    spdlog::info("screenshot {}", path.toStdString());
}

// `w` with the list of `box` open over it (a popup is a window of its own, which grab() leaves
// out): the popup's picture is drawn where it lies on the screen.
void saveWithPopup(QWidget* w, QComboBox* box, const QString& path) {
    box->showPopup();
    QApplication::processEvents();
    QPixmap picture = w->grab();
    QWidget* popup = box->view()->window();
    if (popup && popup->isVisible()) {
        QPainter painter(&picture);
        painter.drawPixmap(w->mapFromGlobal(popup->mapToGlobal(QPoint(0, 0))), popup->grab());
    }
    box->hidePopup();
    picture.save(path);
    spdlog::info("screenshot {}", path.toStdString());
}

// The wizard on the loaded model's folder: the checked folder, then the fit page once its plan
// is there; then the app quits.
void shootWizard(MainWindow* window, const QString& dir) {
    auto* wizard = new SetupWizard(window);
    wizard->show();
    QObject::connect(wizard, &SetupWizard::validated, wizard, [window, wizard, dir] {
        QTimer::singleShot(100, wizard, [window, wizard, dir] {
            save(wizard, dir + QStringLiteral("/wizard.png"));
            wizard->next();
            auto* poll = new QTimer(wizard);
            poll->setInterval(100);
            QObject::connect(poll, &QTimer::timeout, wizard, [window, wizard, dir, poll] {
                if (!wizard->hasPlan() || !wizard->currentPage()->isComplete()) return;
                poll->stop();
                save(wizard, dir + QStringLiteral("/wizard-fit.png"));
                wizard->close();
                // Last, the model unloaded from the switcher, the Continue scene's
                // conversation open: the status bar and the context meter say that no model is
                // loaded (unload.png).
                for (const ConversationInfo& c : window->store().conversations())
                    if (c.title == QLatin1String(kContinueQuestion))
                        window->selectConversation(c.id);
                window->unloadModel();
                QTimer::singleShot(300, window, [window, dir] {
                    window->chatView()->restoreScrollPosition(-1);
                    save(window, dir + QStringLiteral("/unload.png"));
                    // Exit status 1 when something did not work, so scripts and tests see it
                    // (the pictures are saved anyway).
                    QApplication::exit(screenshotsFailed ? 1 : 0);
                });
            });
            poll->start();
        });
    });
    wizard->setCheckpointFolder(window->engine()->modelDir());
}

// A one-pair A/B of the built-in profiles on the loaded model (decode, 8 tokens).
void shootBenchmark(MainWindow* window, const QString& dir) {
    window->openBenchmark();
    BenchmarkDialog* bench = window->benchmark();
    if (!bench) {
        screenshotsFailed = true;
        shootWizard(window, dir);
        return;
    }
    bench->resize(900, 640);
    BenchmarkRequest r;
    r.profileA = QStringLiteral("Stock");
    r.profileB = QStringLiteral("Optimized");
    r.workloads = {QStringLiteral("decode")};
    r.decodeTokens = 8;
    r.pairs = 1;
    bench->setRequest(r);
    QObject::connect(bench, &BenchmarkDialog::finished, window,
                     [window, bench, dir](bool ok, bool, const QString& message) {
                         if (!ok) {
                             screenshotsFailed = true;
                             spdlog::error("screenshots: the benchmark failed: {}",
                                           message.toStdString());
                         }
                         QTimer::singleShot(300, window, [window, bench, dir] {
                             save(bench, dir + QStringLiteral("/benchmark.png"));
                             bench->close();
                             shootWizard(window, dir);
                         });
                     });
    if (!bench->start()) {
        screenshotsFailed = true;
        spdlog::error("screenshots: the benchmark did not start: {}",
                      bench->lastError().toStdString());
        save(bench, dir + QStringLiteral("/benchmark.png"));
        bench->close();
        shootWizard(window, dir);
    }
}
}  // namespace

namespace {
// The chat scene: a reply with reasoning and a Python code block. The demo model's weights are
// random, so its reply text is given (EngineHost::setForcedOutput, tokenized and streamed
// through the real parser, view and store); the stats are the real run's.
const char* const kChatReply =
    "<|channel|>analysis<|message|>The user wants a small function. A list comprehension keeps "
    "it short; mention the edge case of an empty list.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Here is a function that squares the even "
    "numbers:\n\n```python\ndef even_squares(values):\n    # keep the even ones, squared\n"
    "    return [v * v for v in values if v % 2 == 0]\n\nprint(even_squares([1, 2, 3, 4]))  "
    "# [4, 16]\n```\n\n| input | output |\n|---|---|\n| `[1, 2, 3, 4]` | `[4, 16]` |\n"
    "| `[]` | `[]` |\n\n> An empty list gives an empty list.<|return|>";

// A message being written with a text file attached: the chip above the box and the context
// meter under it (attachments.png); the message is not sent.
void attachmentScene(MainWindow* window, const QString& dir, const std::function<void()>& next) {
    const QString file = QDir(dir).filePath(QStringLiteral("meeting-notes.md"));
    QFile f(file);
    if (f.open(QIODevice::WriteOnly)) {
        f.write(
            "# Meeting notes\n\n- Ship the 1.2 release on Friday.\n- Maria reviews the "
            "installer.\n- Open question: keep Windows 10 support?\n");
        f.close();
    }
    window->attachFiles({file});
    QFile::remove(file);
    window->input()->setPlainText(QStringLiteral("Summarise these notes in two sentences."));
    window->contextMeter()->refresh();
    QTimer::singleShot(200, window, [window, dir, next] {
        save(window, dir + QStringLiteral("/attachments.png"));
        while (!window->pendingAttachments().isEmpty()) window->removeAttachment(0);
        window->input()->clear();
        next();
    });
}

// An earlier message of yours edited: the new version answered, "2/2" in its header and the
// earlier text with its reply one click away (edit-versions.png).
void editScene(MainWindow* window, const QString& dir, const std::function<void()>& next) {
    const int row = window->messages()->rowCount() - 2;
    if (row < 0 || window->engine()->busy()) {
        next();
        return;
    }
    window->engine()->setForcedOutput(QStringLiteral(
        "<|channel|>final<|message|>Here it is for the odd numbers:\n\n```python\n"
        "def odd_squares(values):\n    return [v * v for v in values if v % 2]\n```<|return|>"));
    auto done = std::make_shared<QMetaObject::Connection>();
    *done = QObject::connect(window->engine(), &EngineHost::turnFinished, window,
                             [window, dir, next, done](const TurnReport&) {
                                 QObject::disconnect(*done);
                                 window->engine()->setForcedOutput({});
                                 QTimer::singleShot(300, window, [window, dir, next] {
                                     window->chatView()->restoreScrollPosition(-1);
                                     save(window->chatView(),
                                          dir + QStringLiteral("/edit-versions.png"));
                                     next();
                                 });
                             });
    window->editMessage(
        row, QStringLiteral("Write a Python function for the squares of the odd numbers."));
    if (!window->engine()->busy()) {
        QObject::disconnect(*done);
        window->engine()->setForcedOutput({});
        next();
    }
}

// Saved assistants: the panel's Assistant box open on them, the first one chosen
// (assistants.png). They are the user's settings, so they are removed again afterwards.
void assistantsScene(MainWindow* window, const QString& dir, const std::function<void()>& next) {
    SettingsPanel* panel = window->settingsPanel();
    const ConversationSettings before = panel->settings();
    const QString defaultBefore = defaultAssistant();
    struct Made {
        const char* name;
        const char* prompt;
        const char* effort;
        double temperature;
    };
    const Made made[] = {
        {"Python tutor", "You are a patient Python tutor. Keep answers short and show code.",
         "medium", 0.3},
        {"Translator", "Translate what the user writes into English; keep the formatting.", "low",
         0.2},
        {"Code reviewer",
         "Review the code the user pastes: bugs first, then style. Quote the lines you mean.",
         "high", 0.5},
    };
    QStringList names;
    for (const Made& m : made) {
        if (assistantNamed(QString::fromUtf8(m.name))) continue;  // the user's own: kept
        Assistant a;
        a.name = QString::fromUtf8(m.name);
        a.settings = before;
        a.settings.systemPrompt = QString::fromUtf8(m.prompt);
        a.settings.reasoningEffort = QString::fromUtf8(m.effort);
        a.settings.sampling.temperature = m.temperature;
        if (saveAssistant(a)) names << a.name;
    }
    panel->fillAssistants();
    panel->applyAssistant(QStringLiteral("Python tutor"));
    QTimer::singleShot(200, window, [window, panel, dir, next, names, before, defaultBefore] {
        saveWithPopup(window->settingsDock(), panel->assistantBox(),
                      dir + QStringLiteral("/assistants.png"));
        for (const QString& n : names) removeAssistant(n);
        setDefaultAssistant(defaultBefore);
        panel->fillAssistants();
        panel->setSettings(before);
        next();
    });
}

// A reply cut by the token limit with its Continue button (continue.png), then a branch from
// it: the new conversation opened beside the original in the list (branch.png). The chat
// scene's conversation is opened again afterwards.
void continueScene(MainWindow* window, const QString& dir, const std::function<void()>& next) {
    const qint64 back = window->currentConversation();
    window->newConversation();
    window->engine()->setForcedOutput(QStringLiteral(
        "<|channel|>final<|message|>A virtual environment keeps a project's packages apart from "
        "the rest of the PC.\n\n1. Open a terminal in the project folder.\n2. Create it: "
        "`py -m venv .venv`\n3. Activate it: `.venv\\Scripts\\activate` (PowerShell: "
        "`.venv\\Scripts\\Activate.ps1`)\n4. Install what the project needs: `pip install -r "
        "requirements.txt`\n5. Leave it with `deactivate`.\n\nVS Code finds the environment "
        "by itself once the folder is open.<|return|>"));
    window->setTurnTokenLimit(56);
    window->input()->setPlainText(QString::fromUtf8(kContinueQuestion));
    window->sendMessage();
    auto restore = [window, back, next] {
        window->engine()->setForcedOutput({});
        window->setTurnTokenLimit(48);
        if (back != 0) window->selectConversation(back);
        next();
    };
    if (!window->engine()->busy()) {
        restore();
        return;
    }
    auto done = std::make_shared<QMetaObject::Connection>();
    *done =
        QObject::connect(window->engine(), &EngineHost::turnFinished, window,
                         [window, dir, restore, done](const TurnReport&) {
                             QObject::disconnect(*done);
                             QTimer::singleShot(300, window, [window, dir, restore] {
                                 window->chatView()->restoreScrollPosition(-1);
                                 save(window->chatView(), dir + QStringLiteral("/continue.png"));
                                 window->branchFrom(window->messages()->rowCount() - 1);
                                 QTimer::singleShot(300, window, [window, dir, restore] {
                                     window->chatView()->restoreScrollPosition(-1);
                                     save(window, dir + QStringLiteral("/branch.png"));
                                     restore();
                                 });
                             });
                         });
}

// Sends the chat scene's question, opens the reply's reasoning, saves chat.png, then `next`.
void chatScene(MainWindow* window, const QString& dir, std::function<void()> next) {
    window->engine()->setForcedOutput(QString::fromUtf8(kChatReply));
    window->setTurnTokenLimit(400);
    // The settings panel shows a conversation of its own: a preset and a system prompt.
    SettingsPanel* panel = window->settingsPanel();
    panel->applyPreset(QStringLiteral("Precise"));
    panel->systemPromptEdit()->setPlainText(
        QStringLiteral("You are a patient Python tutor. Keep answers short."));
    window->input()->setPlainText(
        QStringLiteral("Write a Python function for the squares of the even numbers."));
    window->sendMessage();
    if (!window->engine()->busy()) {  // no model: the other pictures still get taken
        window->engine()->setForcedOutput({});
        next();
        return;
    }
    auto done = std::make_shared<QMetaObject::Connection>();
    *done = QObject::connect(
        window->engine(), &EngineHost::turnFinished, window,
        [window, dir, next, done](const TurnReport&) {
            QObject::disconnect(*done);
            window->engine()->setForcedOutput({});
            window->setTurnTokenLimit(48);
            QTimer::singleShot(200, window, [window, dir, next] {
                ChatView* chat = window->chatView();
                if (MessageWidget* w = chat->messageWidget(chat->messageCount() - 1))
                    w->setReasoningOpen(true);
                QTimer::singleShot(200, window, [window, dir, next] {
                    window->chatView()->restoreScrollPosition(-1);
                    save(window->chatView(), dir + QStringLiteral("/chat.png"));
                    editScene(window, dir, [window, dir, next] {
                        attachmentScene(window, dir, [window, dir, next] {
                            continueScene(window, dir, [window, dir, next] {
                                assistantsScene(window, dir, next);
                            });
                        });
                    });
                });
            });
        });
}
}  // namespace

void takeScreenshots(MainWindow* window, const QString& dir) {
    QDir().mkpath(dir);
    window->setTurnTokenLimit(48);
    auto shoot = [window, dir] {
        save(window, dir + QStringLiteral("/first-start.png"));
        // A short exchange first, so the chat, stats and telemetry have something to show.
        window->input()->setPlainText(QStringLiteral("Hello! What can you do?"));
        window->sendMessage();
        auto after = std::make_shared<QMetaObject::Connection>();
        auto finish = [window, dir] {
            const MessageModel* m = window->messages();
            screenshotsFailed = window->engine()->state() != EngineHost::State::ready ||
                                m->rowCount() < 2 || m->at(m->rowCount() - 1).content.isEmpty();
            if (screenshotsFailed)
                spdlog::error(
                    "screenshots: the model did not load or the message got no reply ({})",
                    window->engine()->lastError().toStdString());
            // What the status bar says (where the model runs, and why not on the GPU): the
            // installer check reads it from the log (scripts/check-msi.sh).
            spdlog::info("status bar: {}", window->engineLabel()->text().toStdString());
            window->telemetry()->show();
            window->telemetry()->poll();
            QTimer::singleShot(300, window, [window, dir] {
                save(window, dir + QStringLiteral("/main.png"));
                save(window->settingsDock(), dir + QStringLiteral("/settings-panel.png"));
                save(window->telemetry(), dir + QStringLiteral("/telemetry.png"));
                {
                    ProfileStore profiles;
                    ProfileDialog dialog(
                        &profiles, QDir(dir).filePath(QStringLiteral(".profiles.json")), window);
                    dialog.show();
                    save(&dialog, dir + QStringLiteral("/profiles.png"));
                }
                {
                    AppSettingsDialog settings(window);
                    settings.show();
                    save(&settings, dir + QStringLiteral("/settings.png"));
                }
                shootBenchmark(window, dir);
            });
        };
        if (!window->engine()->busy()) {
            chatScene(window, dir, finish);
            return;
        }
        *after = QObject::connect(window->engine(), &EngineHost::turnFinished, window,
                                  [after, finish, window, dir](const TurnReport&) {
                                      QObject::disconnect(*after);
                                      QTimer::singleShot(200, window, [window, dir, finish] {
                                          chatScene(window, dir, finish);
                                      });
                                  });
    };
    auto* engine = window->engine();
    if (engine->state() == EngineHost::State::ready ||
        engine->state() == EngineHost::State::failed) {
        QTimer::singleShot(500, window, shoot);
        return;
    }
    auto once = std::make_shared<QMetaObject::Connection>();
    *once = QObject::connect(
        engine, &EngineHost::stateChanged, window, [once, shoot](EngineHost::State s) {
            if (s == EngineHost::State::ready || s == EngineHost::State::failed) {
                QObject::disconnect(*once);
                QTimer::singleShot(500, shoot);
            }
        });
}

}  // namespace neural::gui
