// The provider contract's shared pieces (toolhost/tool.h): how a long result is cut for the model.
#include <gtest/gtest.h>

#include "tool.h"

namespace neural::toolhost {
namespace {

TEST(ToolResult, AShortResultIsKeptWhole) {
    ToolOutcome outcome;
    setResultText(outcome, QStringLiteral("42"), 10);
    EXPECT_EQ(outcome.text, QStringLiteral("42"));
    EXPECT_FALSE(outcome.truncated);
    EXPECT_EQ(outcome.fullBytes, 2);
}

TEST(ToolResult, ALongResultIsCutWithANoteNamingWhatWasLeftOut) {
    ToolOutcome outcome;
    setResultText(outcome, QString(100, QLatin1Char('a')), 10);
    EXPECT_TRUE(outcome.truncated);
    EXPECT_EQ(outcome.fullBytes, 100);
    EXPECT_TRUE(outcome.text.startsWith(QString(10, QLatin1Char('a')) + QLatin1Char('\n')));
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("90 of 100 bytes left out")));
}

TEST(ToolResult, TheCutNeverSplitsACharacter) {
    ToolOutcome outcome;
    // "é" is two bytes in UTF-8: a 3-byte limit cuts after the first one.
    setResultText(outcome, QStringLiteral("\u00e9\u00e9\u00e9"), 3);
    EXPECT_TRUE(outcome.truncated);
    EXPECT_TRUE(outcome.text.startsWith(QStringLiteral("\u00e9\n")));
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("4 of 6 bytes left out")));
}

TEST(ToolResult, StatusNamesAreTheOnesTheConversationStores) {
    EXPECT_EQ(statusName(ToolOutcome::Status::ok), QStringLiteral("ok"));
    EXPECT_EQ(statusName(ToolOutcome::Status::toolError), QStringLiteral("tool_error"));
    EXPECT_EQ(statusName(ToolOutcome::Status::timedOut), QStringLiteral("timed_out"));
    EXPECT_EQ(statusName(ToolOutcome::Status::denied), QStringLiteral("denied"));
}

}  // namespace
}  // namespace neural::toolhost
