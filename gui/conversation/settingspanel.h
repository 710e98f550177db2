// The conversation settings panel beside the chat (View > Conversation settings, Ctrl+Shift+S):
// a preset, temperature, top-p, top-k, min-p, a random or fixed seed, the reply's token limit,
// the reasoning effort and the system prompt of the open conversation. The window stores
// every change with the conversation (ConversationStore) and reads the panel at each send.
//
// The widgets hold the API's limits (SamplingSettings); each tooltip names the API field the
// value travels as. A preset fills the sampling fields; "Save as preset..." keeps the current
// ones under a name (samplingsettings.h); a user preset can be deleted again. An assistant
// (conversation/assistants.h) fills every field, the system prompt and effort too; "Save as
// assistant..." keeps them all under a name.
#pragma once

#include <QWidget>

#include "conversation/samplingsettings.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTimer;

namespace neural::gui {

struct ConversationSettings {
    QString systemPrompt;
    QString reasoningEffort = QStringLiteral("medium");
    SamplingSettings sampling;
    bool operator==(const ConversationSettings& o) const {
        return systemPrompt == o.systemPrompt && reasoningEffort == o.reasoningEffort &&
               sampling == o.sampling;
    }
};

class SettingsPanel : public QWidget {
    Q_OBJECT
public:
    explicit SettingsPanel(QWidget* parent = nullptr);

    // Shows `s` (no settingsChanged).
    void setSettings(const ConversationSettings& s);
    ConversationSettings settings() const;
    SamplingSettings sampling() const;
    // What "app setting" means for the token limit (the Settings page's reply limit).
    void setDefaultMaxTokens(int n);
    // Fills the sampling fields from the preset named `name`; false when there is none.
    bool applyPreset(const QString& name);
    // Saves the current sampling fields as preset `name` (asks for a name when empty).
    bool saveAsPreset(const QString& name = {});
    // Fills every field from the assistant named `name` (no settingsChanged); false when there
    // is none.
    bool applyAssistant(const QString& name);
    // Saves the current fields as assistant `name` (asks for a name when empty).
    bool saveAsAssistant(const QString& name = {});
    // Lists the saved assistants again (another window or the Settings page changed them).
    void fillAssistants();
    // A pending system prompt edit is reported now (before a send reads the settings).
    void flush();

    // Test access.
    QComboBox* presetBox() const { return m_preset; }
    QComboBox* assistantBox() const { return m_assistant; }
    QPushButton* saveAssistantButton() const { return m_saveAssistant; }
    QPushButton* deleteAssistantButton() const { return m_deleteAssistant; }
    QDoubleSpinBox* temperatureBox() const { return m_temperature; }
    QDoubleSpinBox* topPBox() const { return m_topP; }
    QSpinBox* topKBox() const { return m_topK; }
    QDoubleSpinBox* minPBox() const { return m_minP; }
    QCheckBox* fixedSeedBox() const { return m_fixedSeed; }
    QSpinBox* seedBox() const { return m_seed; }
    QSpinBox* maxTokensBox() const { return m_maxTokens; }
    QComboBox* effortBox() const { return m_effort; }
    QPlainTextEdit* systemPromptEdit() const { return m_systemPrompt; }
    QPushButton* savePresetButton() const { return m_savePreset; }
    QPushButton* deletePresetButton() const { return m_deletePreset; }

signals:
    // The user changed a field (a preset choice included).
    void settingsChanged();

private:
    void fillPresets();
    void showMatchingPreset();
    void showMatchingAssistant();
    void edited();

    QComboBox* m_assistant;
    QPushButton* m_saveAssistant;
    QPushButton* m_deleteAssistant;
    QComboBox* m_preset;
    QPushButton* m_savePreset;
    QPushButton* m_deletePreset;
    QDoubleSpinBox* m_temperature;
    QDoubleSpinBox* m_topP;
    QSpinBox* m_topK;
    QDoubleSpinBox* m_minP;
    QCheckBox* m_fixedSeed;
    QSpinBox* m_seed;
    QSpinBox* m_maxTokens;
    QComboBox* m_effort;
    QPlainTextEdit* m_systemPrompt;
    QTimer* m_promptTimer;  // a typed system prompt is reported once typing pauses
    bool m_filling = false;
    QString m_presetName;  // the preset shown; presets are told apart by name, not values
};

}  // namespace neural::gui
