#include "conversation/deltabatcher.h"

namespace neural::gui {

DeltaBatcher::DeltaBatcher(int intervalMs, QObject* parent) : QObject(parent) {
    // Single shot, armed by the first delta after a release: an idle batcher costs no wakeups,
    // and the first token of a reply shows after at most one interval.
    m_timer.setSingleShot(true);
    m_timer.setInterval(intervalMs);
    m_timer.setTimerType(Qt::PreciseTimer);
    connect(&m_timer, &QTimer::timeout, this, &DeltaBatcher::flush);
}

void DeltaBatcher::arm() {
    if (!m_timer.isActive()) m_timer.start();
}

void DeltaBatcher::addReasoning(const QString& text) {
    if (text.isEmpty()) return;
    m_reasoning += text;
    ++m_pieces;
    arm();
}

void DeltaBatcher::addContent(const QString& text) {
    if (text.isEmpty()) return;
    m_content += text;
    ++m_pieces;
    arm();
}

void DeltaBatcher::flush() {
    m_timer.stop();
    if (m_reasoning.isEmpty() && m_content.isEmpty()) return;
    const QString r = std::exchange(m_reasoning, {});
    const QString c = std::exchange(m_content, {});
    m_releasedPieces = std::exchange(m_pieces, 0);
    emit released(r, c);
}

}  // namespace neural::gui
