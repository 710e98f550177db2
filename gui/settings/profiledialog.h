// Edits the profiles: which one is active, its model folder and store, what the engine learned
// about the model's experts (tokens, date; Reset deletes the file: the next load starts without,
// and a running engine starts learning afresh), and every knob with its
// one-line explanation, labelled in words (the engine flag in the tooltip). Knobs this build or
// PC cannot apply are disabled, say why, and sit together under one line at the end (hidden
// until "Show them"). "Apply" saves
// (atomically) and asks the app to reload the engine with the active profile.
#pragma once

#include <QDialog>
#include <QHash>

#include "settings/profile.h"

class QLabel;

class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QWidget;

namespace neural::gui {

class ProfileDialog : public QDialog {
    Q_OBJECT
public:
    ProfileDialog(ProfileStore* store, QString path, QWidget* parent = nullptr);
    QWidget* editor(const QString& key) const { return m_editors.value(key); }
    // The line that stands for the settings that do not apply (null when all apply).
    QLabel* notApplicableLine() const { return m_notApplicable; }
    // The learned expert statistics of the shown profile's model: what they were learned from,
    // and the button that resets them.
    QLabel* statsLine() const { return m_statsLine; }
    QPushButton* statsResetButton() const { return m_statsReset; }
    // The file those statistics are in ("" when the profile turns them off).
    QString statsFile() const { return m_statsFile; }

signals:
    void applied(const neural::gui::Profile& active);

private:
    void showProfile(const QString& name);
    void collect();        // editors -> the shown profile
    void updateEnabled();  // the knobs the shown backend refuses are disabled, with the reason
    void apply();
    void updateStats();  // the statistics line for the model, store and setting shown

    ProfileStore* m_store;
    QString m_path;
    QString m_shown;
    QComboBox* m_profiles;
    QLineEdit* m_model;
    QLineEdit* m_storeFile;
    QHash<QString, QWidget*> m_editors;
    QLabel* m_notApplicable = nullptr;
    QHash<QString, QLabel*> m_helps;  // each knob's help line
    QLabel* m_statsLine = nullptr;
    QPushButton* m_statsReset = nullptr;
    QString m_statsFile;
};

}  // namespace neural::gui
