// The window's conversation features on the tiny fixture, offscreen: the conversation settings
// panel (its values reach the turn's chat request and the sampler, are stored with the
// conversation and come back with it; presets), the load progress in the status bar, the model
// switcher's models found on disk and recent ones, the theme that follows the system, and the
// keyboard and accessibility audit (every interactive widget has an accessible name; the
// shortcuts act).
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <QToolButton>

#include "app/mainwindow.h"
#include "app/modelcatalog.h"
#include "common/paths.h"
#include "app/theme.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/markdown.h"
#include "conversation/settingspanel.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "settings/appsettingsdialog.h"
#include "store/repack.h"
#include "support/fixtures.h"

namespace neural::gui {
namespace {

using test::fixtureDir;
using test::spinFor;
using test::spinUntil;

class PanelTest : public test::WindowTest {
protected:
    PanelTest() : WindowTest(12) {}
    void TearDown() override {
        WindowTest::TearDown();
        setSystemDarkForTesting(std::nullopt);
        applyTheme(QStringLiteral("light"));
    }
    SettingsPanel* panel() { return m_window->settingsPanel(); }
    // Sends `keys` to the window as a user would (the shortcut map needs the active window).
    void press(QWidget* target, Qt::Key key, Qt::KeyboardModifiers mods) {
        QApplication::setActiveWindow(m_window.get());
        QTest::keyClick(target, key, mods);
        spinFor(20);
    }
};

// The panel's values ride the turn's chat request, the same SamplingParams an API request
// fills, and reach the sampler: a fixed seed gives the same reply again, another seed another.
TEST_F(PanelTest, TheSettingsPanelsValuesReachTheTurnsRequest) {
    ASSERT_NE(m_window->settingsDock(), nullptr);
    EXPECT_TRUE(m_window->settingsDock()->isVisible());
    panel()->temperatureBox()->setValue(0.7);
    panel()->topPBox()->setValue(0.85);
    panel()->topKBox()->setValue(40);
    panel()->minPBox()->setValue(0.05);
    panel()->fixedSeedBox()->setChecked(true);
    panel()->seedBox()->setValue(4242);
    panel()->maxTokensBox()->setValue(9);
    panel()->effortBox()->setCurrentIndex(panel()->effortBox()->findData(QStringLiteral("high")));
    panel()->systemPromptEdit()->setPlainText(QStringLiteral("Answer in French."));
    ASSERT_TRUE(send(QStringLiteral("hello")));

    const openai::ChatRequest& req = m_window->engine()->lastRequest();
    EXPECT_FLOAT_EQ(req.sampling.temperature, 0.7f);
    EXPECT_FLOAT_EQ(req.sampling.top_p, 0.85f);
    EXPECT_EQ(req.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(req.sampling.min_p, 0.05f);
    EXPECT_EQ(req.sampling.seed, 4242u);
    EXPECT_TRUE(req.seed_given);
    EXPECT_EQ(req.max_tokens.value_or(0), 9);
    EXPECT_EQ(req.system.reasoning_effort, chat::ReasoningEffort::high);
    EXPECT_EQ(req.developer.instructions, "Answer in French.");

    // Stored with the conversation: a restart and a reopened conversation show them again.
    const qint64 id = m_window->currentConversation();
    const auto info = m_window->store().conversation(id);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->sampling, panel()->sampling());
    EXPECT_EQ(info->systemPrompt, QStringLiteral("Answer in French."));
    m_window->newConversation();
    EXPECT_TRUE(panel()->systemPromptEdit()->toPlainText().isEmpty());
    panel()->temperatureBox()->setValue(1.3);
    m_window.reset();
    open();
    m_window->selectConversation(id);
    EXPECT_DOUBLE_EQ(panel()->temperatureBox()->value(), 0.7);
    EXPECT_EQ(panel()->seedBox()->value(), 4242);
    EXPECT_TRUE(panel()->fixedSeedBox()->isChecked());
    EXPECT_EQ(panel()->systemPromptEdit()->toPlainText(), QStringLiteral("Answer in French."));

    // Random seed: a fresh one per turn, not marked as given.
    panel()->fixedSeedBox()->setChecked(false);
    ASSERT_TRUE(send(QStringLiteral("again")));
    EXPECT_FALSE(m_window->engine()->lastRequest().seed_given);
    EXPECT_EQ(m_window->store().conversation(id)->sampling.fixedSeed, false);
    // The app setting when the panel says so.
    panel()->maxTokensBox()->setValue(0);
    ASSERT_TRUE(send(QStringLiteral("and again")));
    EXPECT_EQ(m_window->engine()->lastRequest().max_tokens.value_or(0), 12);
}

TEST_F(PanelTest, AFixedSeedRepeatsTheSampledReply) {
    m_window->engine()->setForcedOutput({});
    panel()->temperatureBox()->setValue(1.0);
    panel()->fixedSeedBox()->setChecked(true);
    panel()->seedBox()->setValue(7);
    ASSERT_TRUE(send(QStringLiteral("tell me something")));
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    const ChatMessage first = m_window->messages()->at(1);
    m_window->regenerate(1);
    ASSERT_TRUE(idle());
    const ChatMessage same = m_window->messages()->at(1);
    EXPECT_EQ(same.content + same.reasoning, first.content + first.reasoning);
    ASSERT_FALSE((first.content + first.reasoning).isEmpty());
    panel()->seedBox()->setValue(8);
    m_window->regenerate(1);
    ASSERT_TRUE(idle());
    const ChatMessage other = m_window->messages()->at(1);
    EXPECT_NE(other.content + other.reasoning, first.content + first.reasoning);
}

// Presets fill the fields; the current fields saved under a name come back in a new panel;
// a built-in's name is refused; the fields show "Custom" once edited.
TEST_F(PanelTest, PresetsFillTheFieldsAndTheUsersOwnAreKept) {
    QComboBox* presets = panel()->presetBox();
    for (const char* name : {"Balanced", "Precise", "Creative"})
        EXPECT_NE(presets->findData(QString::fromLatin1(name)), -1) << name;
    EXPECT_EQ(presets->currentData().toString(), QStringLiteral("Balanced"));
    const int precise = presets->findData(QStringLiteral("Precise"));
    emit presets->activated(precise);
    EXPECT_DOUBLE_EQ(panel()->temperatureBox()->value(), 0.3);
    EXPECT_DOUBLE_EQ(panel()->topPBox()->value(), 0.9);
    EXPECT_EQ(presets->currentIndex(), precise);

    panel()->topKBox()->setValue(17);
    EXPECT_EQ(presets->currentIndex(), -1);                          // Custom
    EXPECT_FALSE(panel()->saveAsPreset(QStringLiteral("precise")));  // a built-in's name
    ASSERT_TRUE(panel()->saveAsPreset(QStringLiteral("Mine")));
    EXPECT_EQ(presets->currentData().toString(), QStringLiteral("Mine"));
    EXPECT_TRUE(panel()->deletePresetButton()->isEnabled());

    SettingsPanel fresh;
    ASSERT_NE(fresh.presetBox()->findData(QStringLiteral("Mine")), -1);
    ASSERT_TRUE(fresh.applyPreset(QStringLiteral("Mine")));
    EXPECT_EQ(fresh.topKBox()->value(), 17);
    EXPECT_DOUBLE_EQ(fresh.temperatureBox()->value(), 0.3);
    fresh.deletePresetButton()->click();
    EXPECT_EQ(fresh.presetBox()->findData(QStringLiteral("Mine")), -1);
    EXPECT_TRUE(samplingPresets().size() == builtInSamplingPresets().size());

    // The widgets hold the API's limits.
    panel()->temperatureBox()->setValue(5);
    EXPECT_DOUBLE_EQ(panel()->temperatureBox()->value(), SamplingSettings::kMaxTemperature);
    panel()->topPBox()->setValue(0);
    EXPECT_GT(panel()->topPBox()->value(), 0.0);
    for (QWidget* w : panel()->findChildren<QWidget*>()) {
        if (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w)) {
            EXPECT_FALSE(w->toolTip().isEmpty()) << w->accessibleName().toStdString();
        }
    }
    EXPECT_NE(panel()->temperatureBox()->toolTip().indexOf(QStringLiteral("temperature")), -1);
    EXPECT_NE(panel()->topPBox()->toolTip().indexOf(QStringLiteral("top_p")), -1);
}

// A preset of yours with the values of a built-in one showed as the built-in and could be
// neither chosen nor deleted: presets are told apart by name.
TEST_F(PanelTest, APresetOfYoursWithABuiltInsValuesIsItself) {
    QComboBox* presets = panel()->presetBox();
    emit presets->activated(presets->findData(QStringLiteral("Balanced")));
    ASSERT_TRUE(panel()->saveAsPreset(QStringLiteral("Same as Balanced")));
    EXPECT_EQ(presets->currentData().toString(), QStringLiteral("Same as Balanced"));
    EXPECT_TRUE(panel()->deletePresetButton()->isEnabled());
    emit presets->activated(presets->findData(QStringLiteral("Balanced")));
    EXPECT_EQ(presets->currentData().toString(), QStringLiteral("Balanced"));
    EXPECT_FALSE(panel()->deletePresetButton()->isEnabled());
    emit presets->activated(presets->findData(QStringLiteral("Same as Balanced")));
    EXPECT_EQ(presets->currentData().toString(), QStringLiteral("Same as Balanced"));
    ASSERT_TRUE(panel()->deletePresetButton()->isEnabled());
    panel()->deletePresetButton()->click();
    EXPECT_EQ(presets->findData(QStringLiteral("Same as Balanced")), -1);
    EXPECT_EQ(presets->currentData().toString(), QStringLiteral("Balanced"));
}

// A load reports rising percentages ending at 100; the status bar says "Loading NAME... N%".
TEST_F(PanelTest, ALoadShowsItsProgressInTheStatusBar) {
    std::vector<int> percents;
    QStringList labels;
    QObject::connect(m_window->engine(), &EngineHost::loadProgress, m_window.get(),
                     [&](int percent, const QString&) {
                         percents.push_back(percent);
                         labels << m_window->engineLabel()->text();
                     });
    m_window->loadModel(fixtureDir(), {});
    EXPECT_EQ(m_window->engine()->state(), EngineHost::State::loading);
    EXPECT_TRUE(m_window->busyBar()->isVisible());
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_GE(percents.size(), 3u);
    EXPECT_EQ(percents.back(), 100);
    for (std::size_t i = 1; i < percents.size(); ++i) EXPECT_GT(percents[i], percents[i - 1]);
    const QString name = QDir(fixtureDir()).dirName();
    for (int i = 0; i + 1 < labels.size(); ++i) {
        EXPECT_EQ(labels[i], QStringLiteral("Loading %1\u2026 %2%").arg(name).arg(percents[i]))
            << labels[i].toStdString();
    }
    EXPECT_TRUE(m_window->engineLabel()->text().startsWith(QStringLiteral("Ready")));
    EXPECT_FALSE(m_window->busyBar()->isVisible());
    EXPECT_EQ(m_window->engine()->loadPercent(), -1);
}

// Checkpoints and stores in the models folders are listed; choosing one loads it (with its
// store) and it joins the recent models.
TEST_F(PanelTest, TheModelSwitcherListsTheStoresFoundAndLoadsOne) {
    // A copy of the fixture in the app's models folder, with a store the wizard's way (inside).
    const QString copy = modelsDir() + QStringLiteral("/tiny-copy");
    QDir(copy).removeRecursively();
    ASSERT_TRUE(QDir().mkpath(copy));
    for (const QString& f : QDir(fixtureDir()).entryList(QDir::Files))
        ASSERT_TRUE(QFile::copy(fixtureDir() + QLatin1Char('/') + f, copy + QLatin1Char('/') + f));
    store::RepackOptions ro;
    ro.checkpoint = copy.toStdString();
    ro.out = (copy + QStringLiteral("/experts-raw.nstore")).toStdString();
    store::repack(ro);
    // Another folder (the setting), with a GGUF file and a checkpoint that is only a name.
    QTemporaryDir other;
    auto touch = [](const QString& path) {
        QFile f(path);
        return f.open(QIODevice::WriteOnly);
    };
    ASSERT_TRUE(touch(other.filePath(QStringLiteral("model.gguf"))));
    QDir(other.path()).mkdir(QStringLiteral("ckpt"));
    ASSERT_TRUE(touch(other.filePath(QStringLiteral("ckpt/config.json"))));
    QDir(other.path()).mkdir(QStringLiteral("not-a-model"));
    appSettings()->setValue(settingsKey::modelFolders, QStringList{other.path()});

    m_window->fillModelSwitcher();
    QComboBox* models = m_window->modelSwitcher();
    QStringList listed;
    int withStore = -1;
    for (int i = 0; i < models->count(); ++i) {
        if (models->itemData(i, MainWindow::kSwitchKindRole).toString() != QLatin1String("model"))
            continue;
        listed << models->itemText(i);
        if (models->itemData(i, MainWindow::kSwitchStoreRole)
                .toString()
                .endsWith(QStringLiteral("experts-raw.nstore")))
            withStore = i;
    }
    EXPECT_TRUE(listed.contains(QStringLiteral("tiny-copy"))) << listed.join(',').toStdString();
    EXPECT_TRUE(listed.contains(QStringLiteral("tiny-copy + experts-raw.nstore")));
    EXPECT_TRUE(listed.contains(QStringLiteral("model.gguf")));
    EXPECT_TRUE(listed.contains(QStringLiteral("ckpt")));
    EXPECT_FALSE(listed.join(',').contains(QStringLiteral("not-a-model")));
    EXPECT_NE(models->findData(QStringLiteral("Stock")), -1);  // the profiles stay
    EXPECT_NE(models->findData(QString()), -1);                // and the demo model
    ASSERT_GE(withStore, 0);

    emit models->activated(withStore);
    ASSERT_TRUE(spinUntil([&] {
        return m_window->engine()->state() == EngineHost::State::ready &&
               m_window->engine()->modelDir() == QFileInfo(copy).absoluteFilePath();
    })) << m_window->engine()->lastError().toStdString();
    ASSERT_NE(m_window->engine()->model()->store(), nullptr);  // its experts from the store
    EXPECT_TRUE(send(QStringLiteral("from the store")));
    const QList<ModelEntry> recent = recentModels();
    ASSERT_FALSE(recent.isEmpty());
    EXPECT_EQ(QFileInfo(recent.first().store).fileName(), QStringLiteral("experts-raw.nstore"));
    // The running entry is the one shown, listed among the recent ones.
    EXPECT_EQ(models->currentText(), QStringLiteral("Recent: tiny-copy + experts-raw.nstore"));
    if (!QDir(copy).removeRecursively()) {
        // Windows does not delete a file that is memory-mapped: the loaded model's files stay,
        // so "gone from the disk" cannot happen to the running model there.
        ASSERT_TRUE(QFileInfo::exists(copy));
        return;
    }
    m_window->fillModelSwitcher();
    for (int i = 0; i < models->count(); ++i) {
        EXPECT_FALSE(models->itemText(i).contains(QStringLiteral("tiny-copy")))
            << "a model gone from the disk is not offered";
    }
}

// The theme: the Settings page's choice persists and re-renders the messages in the new
// colours; "system" follows the system's scheme when it changes.
TEST_F(PanelTest, TheThemeFollowsTheChoiceAndTheSystem) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>Code:\n\n```js\nlet x = 1;\n```\n<|end|>"));
    ASSERT_TRUE(send(QStringLiteral("code please")));
    MessageBody* body = m_window->chatView()->messageWidget(1)->body();
    auto codeBackground = [&] {
        for (QTextBlock b = body->document()->begin(); b.isValid(); b = b.next())
            if (b.blockFormat().hasProperty(QTextFormat::BlockCodeFence))
                return b.blockFormat().background().color().lightness();
        return -1;
    };
    {
        AppSettingsDialog dialog(m_window.get());
        QObject::connect(&dialog, &AppSettingsDialog::themeChanged, m_window.get(),
                         [](const QString& t) { applyTheme(t); });
        dialog.themeBox()->setCurrentIndex(dialog.themeBox()->findData(QStringLiteral("dark")));
        dialog.save();
    }
    EXPECT_TRUE(themeIsDark());
    EXPECT_TRUE(spinUntil([&] { return codeBackground() >= 0 && codeBackground() < 100; }, 3000))
        << codeBackground();
    {
        AppSettingsDialog again(m_window.get());
        EXPECT_EQ(again.themeBox()->currentData().toString(), QStringLiteral("dark"));
    }

    // System, the system light: the light palette; then the system turns dark.
    setSystemDarkForTesting(false);
    applyTheme(QStringLiteral("system"));
    EXPECT_EQ(currentTheme(), QStringLiteral("system"));
    EXPECT_FALSE(themeIsDark());
    EXPECT_TRUE(spinUntil([&] { return codeBackground() > 180; }, 3000)) << codeBackground();
    setSystemDarkForTesting(true);
    QEvent change(QEvent::ThemeChange);  // what the platform sends on a new colour scheme
    QApplication::sendEvent(m_window->windowHandle(), &change);
    EXPECT_TRUE(spinUntil([] { return themeIsDark(); }, 3000));
    EXPECT_LT(QApplication::palette().color(QPalette::Window).lightness(), 128);
    EXPECT_TRUE(spinUntil([&] { return codeBackground() >= 0 && codeBackground() < 100; }, 3000));
    // A fixed theme does not follow the system.
    applyTheme(QStringLiteral("light"));
    setSystemDarkForTesting(true);
    QApplication::sendEvent(m_window->windowHandle(), &change);
    spinFor(50);
    EXPECT_FALSE(themeIsDark());
}

// Keyboard and accessibility: focus in the message box at start and after an edit, every
// interactive widget has an accessible name, and the shortcuts act.
TEST_F(PanelTest, EveryControlHasANameAndTheShortcutsAct) {
    EXPECT_EQ(m_window->focusWidget(), m_window->input());
    ASSERT_TRUE(send(QStringLiteral("first question")));
    for (QDockWidget* d : m_window->findChildren<QDockWidget*>()) d->show();
    spinFor(50);
    QStringList unnamed;
    for (QWidget* w : m_window->findChildren<QWidget*>()) {
        const bool interactive = qobject_cast<QAbstractButton*>(w) || qobject_cast<QComboBox*>(w) ||
                                 qobject_cast<QAbstractSpinBox*>(w) ||
                                 qobject_cast<QLineEdit*>(w) || qobject_cast<QPlainTextEdit*>(w) ||
                                 qobject_cast<QListView*>(w);
        if (!interactive || !w->isVisibleTo(m_window.get())) continue;
        // A line edit inside a spin box or combo box is named by its owner.
        if (qobject_cast<QLineEdit*>(w) && (qobject_cast<QAbstractSpinBox*>(w->parentWidget()) ||
                                            qobject_cast<QComboBox*>(w->parentWidget())))
            continue;
        const auto* b = qobject_cast<QAbstractButton*>(w);
        if (w->accessibleName().isEmpty() && !(b && !b->text().isEmpty()))
            unnamed << QStringLiteral("%1 %2").arg(
                QString::fromLatin1(w->metaObject()->className()), w->objectName());
    }
    EXPECT_TRUE(unnamed.isEmpty()) << unnamed.join(QStringLiteral(", ")).toStdString();
    // Buttons without text (icons, arrows) need a name of their own.
    for (QAbstractButton* b : m_window->findChildren<QAbstractButton*>()) {
        if (b->text().isEmpty() && b->isVisibleTo(m_window.get())) {
            EXPECT_FALSE(b->accessibleName().isEmpty()) << b->metaObject()->className();
        }
    }

    // Ctrl+Shift+C copies the last reply; Ctrl+R regenerates it (a second version).
    QApplication::clipboard()->clear();
    press(m_window->input(), Qt::Key_C, Qt::ControlModifier | Qt::ShiftModifier);
    EXPECT_EQ(QApplication::clipboard()->text(), m_window->messages()->at(1).content);
    press(m_window->input(), Qt::Key_R, Qt::ControlModifier);
    ASSERT_TRUE(idle());
    EXPECT_EQ(m_window->messages()->at(1).versions.size(), 2);
    // Ctrl+Shift+E edits your last message in place; Ctrl+Enter there sends it; the focus is
    // back in the message box.
    press(m_window->input(), Qt::Key_E, Qt::ControlModifier | Qt::ShiftModifier);
    MessageWidget* mine = m_window->chatView()->messageWidget(0);
    ASSERT_TRUE(mine->isEditing());
    mine->editor()->setPlainText(QStringLiteral("edited question"));
    press(mine->editor(), Qt::Key_Return, Qt::ControlModifier);
    ASSERT_TRUE(idle());
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("edited question"));
    EXPECT_EQ(m_window->focusWidget(), m_window->input());
    // Ctrl+Enter in the message box sends.
    m_window->input()->setPlainText(QStringLiteral("sent with the keys"));
    press(m_window->input(), Qt::Key_Return, Qt::ControlModifier);
    ASSERT_TRUE(idle());
    EXPECT_EQ(m_window->messages()->rowCount(), 4);
    // Ctrl+Shift+Backspace deletes the last message.
    press(m_window->input(), Qt::Key_Backspace, Qt::ControlModifier | Qt::ShiftModifier);
    EXPECT_EQ(m_window->messages()->rowCount(), 3);
    // Ctrl+Shift+S toggles the settings panel, Ctrl+B the conversation list.
    ASSERT_TRUE(m_window->settingsDock()->isVisible());
    press(m_window->input(), Qt::Key_S, Qt::ControlModifier | Qt::ShiftModifier);
    EXPECT_FALSE(m_window->settingsDock()->isVisible());
    press(m_window->input(), Qt::Key_S, Qt::ControlModifier | Qt::ShiftModifier);
    EXPECT_TRUE(m_window->settingsDock()->isVisible());
    QWidget* list = m_window->splitter()->widget(0);
    press(m_window->input(), Qt::Key_B, Qt::ControlModifier);
    EXPECT_FALSE(list->isVisible());
    press(m_window->input(), Qt::Key_B, Qt::ControlModifier);
    EXPECT_TRUE(list->isVisible());
    // Ctrl+N: a new conversation with the focus in the message box.
    press(m_window->input(), Qt::Key_N, Qt::ControlModifier);
    EXPECT_EQ(m_window->currentConversation(), 0);
    EXPECT_EQ(m_window->messages()->rowCount(), 0);
    EXPECT_EQ(m_window->focusWidget(), m_window->input());
    // Ctrl+, opens the Settings page.
    press(m_window->input(), Qt::Key_Comma, Qt::ControlModifier);
    AppSettingsDialog* settings = nullptr;
    EXPECT_TRUE(spinUntil(
        [&] { return (settings = m_window->findChild<AppSettingsDialog*>()) != nullptr; }, 3000));
    if (settings) settings->reject();
    // Every menu action that does something has a shortcut or sits in a menu.
    QStringList keys;
    for (QAction* a : m_window->findChildren<QAction*>())
        if (!a->shortcut().isEmpty()) keys << a->shortcut().toString();
    for (const char* k : {"Ctrl+N", "Ctrl+R", "Ctrl+Shift+C", "Ctrl+Shift+Backspace", "Esc",
                          "Ctrl+,", "Ctrl+Shift+S", "Ctrl+Return"})
        EXPECT_TRUE(keys.contains(QString::fromLatin1(k))) << k;
}

// A message that has the focus: Delete removes it (after the window asks nothing: the
// message's own Delete button does the same), Ctrl+C copies it.
TEST_F(PanelTest, AFocusedMessageTakesCopyAndDeleteKeys) {
    ASSERT_TRUE(send(QStringLiteral("a message to delete")));
    MessageWidget* reply = m_window->chatView()->messageWidget(1);
    QApplication::setActiveWindow(m_window.get());
    reply->setFocus();
    QApplication::clipboard()->clear();
    press(reply, Qt::Key_C, Qt::ControlModifier);
    EXPECT_EQ(QApplication::clipboard()->text(), m_window->messages()->at(1).content);
    press(reply, Qt::Key_Delete, Qt::NoModifier);
    EXPECT_EQ(m_window->messages()->rowCount(), 1);
}

}  // namespace
}  // namespace neural::gui
