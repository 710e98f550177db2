// Edits the profiles: which one is active, its model folder and store, and every knob with its
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
class QWidget;

namespace neural::gui {

class ProfileDialog : public QDialog {
    Q_OBJECT
public:
    ProfileDialog(ProfileStore* store, QString path, QWidget* parent = nullptr);
    QWidget* editor(const QString& key) const { return m_editors.value(key); }
    // The line that stands for the settings that do not apply (null when all apply).
    QLabel* notApplicableLine() const { return m_notApplicable; }

signals:
    void applied(const neural::gui::Profile& active);

private:
    void showProfile(const QString& name);
    void collect();        // editors -> the shown profile
    void updateEnabled();  // the knobs the shown backend refuses are disabled, with the reason
    void apply();

    ProfileStore* m_store;
    QString m_path;
    QString m_shown;
    QComboBox* m_profiles;
    QLineEdit* m_model;
    QLineEdit* m_storeFile;
    QHash<QString, QWidget*> m_editors;
    QLabel* m_notApplicable = nullptr;
    QHash<QString, QLabel*> m_helps;  // each knob's help line
};

}  // namespace neural::gui
