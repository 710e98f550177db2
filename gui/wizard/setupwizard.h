// First-run / "Set up a model" wizard: checkpoint folder -> validation report (shape, sizes,
// RAM/VRAM fit) -> fit plan (neural::plan_fit on detect_machine(): backend, VRAM budget, expert
// slots, context, threads, kernel, each with its reason; warnings when the model does not fit;
// every value editable; optional VRAM/RAM caps emulate a smaller PC) -> store choice (none, raw, packed with sizes, or an existing store) ->
// destination with a free-space check -> repack with progress, rate, ETA and Cancel -> optional
// verify -> a profile for the model. The slow steps run on worker threads (StoreJob, a loader
// thread for the validation); the wizard never blocks the GUI thread.
#pragma once

#include <QWizard>

#include <cstdint>
#include <functional>

#include "runtime/fit.h"
#include "settings/profile.h"
#include "wizard/checkpointcheck.h"

class QLabel;
class QLineEdit;
class QRadioButton;
class QProgressBar;
class QPushButton;
class QCheckBox;

namespace neural::gui {

// The free space where a store goes; `known` false where the system does not say.
struct DiskSpace {
    bool known = false;
    std::uint64_t available = 0;
    bool readOnly = false;
    QString root;  // the drive's mount point, as shown
};

// The name a model goes by (its profile's, its store folder's): a checkpoint folder's name, a
// GGUF file's without ".gguf" and its split part, a Hugging Face cache snapshot's repository.
QString modelName(const QString& checkpoint);

class SetupWizard : public QWizard {
    Q_OBJECT
public:
    enum Page { FolderPage, FitPage, StorePage, DestinationPage, RepackPage, VerifyPage, DonePage };

    // The fit step's values as the user left them (the plan's, unless edited); they become the
    // profile's knobs.
    struct FitChoice {
        QString backend = QStringLiteral("cpu");
        double vramBudgetGib = 0;
        int poolSlots = -1;
        double poolGib = -1;
        qint64 context = 0;
        int threads = 0;
        QString kernel = QStringLiteral("auto");
        bool kernelPersistent = false;
        double kvCheckpointsGib = 0;  // the plan's (no control on the page)
    };

    explicit SetupWizard(QWidget* parent = nullptr);
    ~SetupWizard() override;

    // What the wizard set up (valid after accept()).
    Profile profile() const;
    // Test hooks: the folder field and the last validation.
    void setCheckpointFolder(const QString& dir);
    const CheckpointReport& report() const { return m_report; }
    QString storeKind() const;  // "none", "raw", "packed", "existing"
    QString storePath() const;  // the store the profile uses ("" for none)
    // The fit step: the last plan (valid once hasPlan()), the machine it was made for, and the
    // values chosen on the page.
    bool hasPlan() const { return m_havePlan; }
    const FitPlan& plan() const { return m_plan; }
    const MachineInfo& machine() const { return m_machine; }
    const FitChoice& fitChoice() const { return m_fit; }
    // Test hook: plan for this machine instead of detect_machine() (a made-up GPU).
    void setMachineForTesting(const MachineInfo& m);
    // The free space at `folder` (QStorageInfo); the test hook replaces it (null: the real one).
    static DiskSpace diskSpace(const QString& folder);
    static void setDiskSpaceForTesting(std::function<DiskSpace(const QString&)> f);

signals:
    void validated(const neural::gui::CheckpointReport& report);

private:
    friend class WizardPage;
    friend class FolderPageWidget;
    friend class FitPageWidget;
    friend class StorePageWidget;
    friend class DestinationPageWidget;
    friend class RepackPageWidget;
    friend class VerifyPageWidget;
    friend class DonePageWidget;

    void validate();

    CheckpointReport m_report;
    QString m_validatedDir;
    QThread* m_checker = nullptr;
    QString m_existingStore;
    QString m_destination;
    QString m_kind = QStringLiteral("none");
    QString m_profileName;
    bool m_storeWritten = false;
    StoreJob* m_job;
    // Fit step.
    MachineInfo m_machine;
    bool m_haveMachine = false;
    FitPlan m_plan;
    bool m_havePlan = false;
    FitChoice m_fit;
    bool m_storePreselected = false;
};

}  // namespace neural::gui

Q_DECLARE_METATYPE(neural::gui::CheckpointReport)
