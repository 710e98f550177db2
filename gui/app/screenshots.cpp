#include "app/screenshots.h"

#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QTimer>

#include <spdlog/spdlog.h>

#include "app/mainwindow.h"
#include "conversation/chatinput.h"
#include "conversation/messagemodel.h"
#include "settings/profiledialog.h"
#include "monitor/telemetrydock.h"
#include "wizard/setupwizard.h"

namespace neural::gui {

namespace {
bool screenshotsFailed = false;

void save(QWidget *w, const QString &path)
{
    w->grab().save(path);
    spdlog::info("screenshot {}", path.toStdString());
}
}  // namespace

void takeScreenshots(MainWindow *window, const QString &dir)
{
    QDir().mkpath(dir);
    window->setTurnTokenLimit(48);
    auto shoot = [window, dir] {
        // A short exchange first, so the chat, stats and telemetry have something to show.
        window->input()->setPlainText(QStringLiteral("Hello! What can you do?"));
        window->sendMessage();
        auto after = std::make_shared<QMetaObject::Connection>();
        auto finish = [window, dir] {
            const MessageModel *m = window->messages();
            screenshotsFailed = window->engine()->state() != EngineHost::State::ready ||
                                m->rowCount() < 2 || m->at(m->rowCount() - 1).content.isEmpty();
            if (screenshotsFailed)
                spdlog::error("screenshots: the model did not load or the message got no reply ({})",
                              window->engine()->lastError().toStdString());
            window->telemetry()->show();
            window->telemetry()->poll();
            QTimer::singleShot(300, window, [window, dir] {
                save(window, dir + QStringLiteral("/main.png"));
                save(window->telemetry(), dir + QStringLiteral("/telemetry.png"));
                ProfileStore profiles;
                ProfileDialog dialog(&profiles, QDir(dir).filePath(QStringLiteral(".profiles.json")), window);
                dialog.show();
                save(&dialog, dir + QStringLiteral("/profiles.png"));
                // The wizard with the loaded model's folder checked (shape, sizes, RAM fit).
                auto *wizard = new SetupWizard(window);
                wizard->show();
                QObject::connect(wizard, &SetupWizard::validated, wizard, [wizard, dir] {
                    QTimer::singleShot(100, wizard, [wizard, dir] {
                        save(wizard, dir + QStringLiteral("/wizard.png"));
                        // Exit status 1 when the model did not load or the message got no
                        // reply, so scripts and tests see it (the pictures are saved anyway).
                        QApplication::exit(screenshotsFailed ? 1 : 0);
                    });
                });
                wizard->setCheckpointFolder(window->engine()->modelDir());
            });
        };
        if (!window->engine()->busy()) {
            finish();
            return;
        }
        *after = QObject::connect(window->engine(), &EngineHost::turnFinished, window,
                                  [after, finish](const TurnReport &) {
                                      QObject::disconnect(*after);
                                      QTimer::singleShot(200, finish);
                                  });
    };
    auto *engine = window->engine();
    if (engine->state() == EngineHost::State::ready || engine->state() == EngineHost::State::failed) {
        QTimer::singleShot(500, window, shoot);
        return;
    }
    auto once = std::make_shared<QMetaObject::Connection>();
    *once = QObject::connect(engine, &EngineHost::stateChanged, window, [once, shoot](EngineHost::State s) {
        if (s == EngineHost::State::ready || s == EngineHost::State::failed) {
            QObject::disconnect(*once);
            QTimer::singleShot(500, shoot);
        }
    });
}

}  // namespace neural::gui
