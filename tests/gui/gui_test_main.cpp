// main() of the GUI tests: a QApplication on the offscreen platform (also when the test is run
// by hand) and a private app home, then GoogleTest.
#include <gtest/gtest.h>

#include <QApplication>
#include <QTemporaryDir>

#include "cpu/parallel.h"

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QTemporaryDir home;
    qputenv("NEURAL_DESKTOP_HOME", home.path().toUtf8());
    // The machine is shared and the fixture tiny: one thread until a model applies its own
    // (LoadOptions::threads; the tests that load one pass 1).
    neural::cpu::set_threads(1);
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
