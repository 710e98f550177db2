// First-run / "Set up a model" wizard: checkpoint folder -> validation report (shape, sizes,
// RAM/VRAM fit) -> store choice (none, raw, packed with sizes, or an existing store) ->
// destination with a free-space check -> repack with progress, rate, ETA and Cancel -> optional
// verify -> a profile for the model. The slow steps run on worker threads (StoreJob, a loader
// thread for the validation); the wizard never blocks the GUI thread.
#pragma once

#include <QWizard>

#include "settings/profile.h"
#include "wizard/checkpointcheck.h"

class QLabel;
class QLineEdit;
class QRadioButton;
class QProgressBar;
class QPushButton;
class QCheckBox;

namespace neural::gui {

class SetupWizard : public QWizard {
    Q_OBJECT
public:
    enum Page { FolderPage, StorePage, DestinationPage, RepackPage, VerifyPage, DonePage };

    explicit SetupWizard(QWidget *parent = nullptr);
    ~SetupWizard() override;

    // What the wizard set up (valid after accept()).
    Profile profile() const;
    // Test hooks: the folder field and the last validation.
    void setCheckpointFolder(const QString &dir);
    const CheckpointReport &report() const { return m_report; }
    QString storeKind() const;  // "none", "raw", "packed", "existing"
    QString storePath() const;  // the store the profile uses ("" for none)

signals:
    void validated(const neural::gui::CheckpointReport &report);

private:
    friend class FolderPageWidget;
    friend class StorePageWidget;
    friend class DestinationPageWidget;
    friend class RepackPageWidget;
    friend class VerifyPageWidget;
    friend class DonePageWidget;

    void validate();

    CheckpointReport m_report;
    QString m_validatedDir;
    QThread *m_checker = nullptr;
    QString m_existingStore;
    QString m_destination;
    QString m_kind = QStringLiteral("none");
    QString m_profileName;
    bool m_storeWritten = false;
    StoreJob *m_job;
};

}  // namespace neural::gui

Q_DECLARE_METATYPE(neural::gui::CheckpointReport)
