// Helpers of the GUI tests: run the event loop until a condition holds.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>

namespace neural::gui::test {

// Processes events until `done()` or `ms` milliseconds passed; returns done().
template <typename Pred>
bool spinUntil(Pred done, int ms = 30000) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    return done();
}

inline void spinFor(int ms) {
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
}

}  // namespace neural::gui::test
