// The models the status bar's model switcher offers besides the profiles: checkpoints (folders
// with a config.json, or gpt-oss GGUF files) and the expert stores (*.nstore, `neural repack`;
// the setup wizard writes them inside the checkpoint folder) found in the models folders, and
// the models loaded most recently. A store is listed with the checkpoint it sits beside (in
// its folder, or beside a GGUF file); whether it matches is checked when it loads.
//
// The models folders: modelsDir() (common/paths.h), the folders of settingsKey::modelFolders, and
// the checkpoint folders of the profiles (for the stores the wizard wrote there). Scanning
// looks one level deep and never opens a file.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

namespace neural::gui {

struct ModelEntry {
    QString model;  // checkpoint folder or .gguf file
    QString store;  // expert store file; "": the checkpoint's own expert tensors
    // "gpt-oss-20b" or "gpt-oss-20b + experts-packed.nstore".
    QString label() const;
    bool operator==(const ModelEntry& o) const;
};

// modelsDir() and the settingsKey::modelFolders list (those that exist).
QStringList modelFolders();
// What the folders hold, sorted by label: each checkpoint (a folder itself, a sub-folder with a
// config.json, or a *.gguf file) alone and with each store in its folder.
QList<ModelEntry> findModels(const QStringList& folders);
// The stores inside (or beside, for a GGUF file) one checkpoint.
QStringList storesOf(const QString& model);
// The models loaded most recently (newest first, at most kMaxRecentModels), those still on disk.
inline constexpr int kMaxRecentModels = 6;
QList<ModelEntry> recentModels();
// Puts `entry` first in the recent list (appSettings()).
void noteRecentModel(const ModelEntry& entry);

}  // namespace neural::gui
