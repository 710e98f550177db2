// The app's user-chosen output files (conversation exports, the telemetry CSV, the profiles)
// go through the engine's output-path rule (platform/atomic_file.h checked_output_path): a
// FIFO, socket, device or folder at the path is refused, a symbolic link is written through to
// its regular target. QSaveFile alone would rename its temporary file over whatever is there.
#pragma once

#include <QString>

#include <filesystem>

#include "neural/error.h"
#include "platform/atomic_file.h"

namespace neural::gui {

// The file to give QSaveFile for `path`; empty with `error` set when the path is refused.
inline QString checkedOutputPath(const QString& path, QString* error) {
    try {
        const std::filesystem::path checked =
            neural::checked_output_path(std::filesystem::path(path.toStdU16String()));
        return QString::fromStdU16String(checked.u16string());
    } catch (const neural::Error& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return {};
    }
}

}  // namespace neural::gui
