// chat::Utf8Stream as the generate loop uses it: complete characters pass, split characters are
// held back, invalid bytes become U+FFFD (one per maximal invalid subpart).
#include <string>

#include <gtest/gtest.h>

#include "chat/utf8_stream.h"

namespace neural {
namespace {

using chat::Utf8Stream;

const std::string kFFFD = "\xEF\xBF\xBD";

TEST(Utf8StreamDecode, AsciiPassesThrough) {
    Utf8Stream s;
    EXPECT_EQ(s.push("Hello"), "Hello");
    EXPECT_EQ(s.push(", world!\n"), ", world!\n");
    EXPECT_EQ(s.push(""), "");
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamDecode, CompleteMultibyteCharactersPass) {
    Utf8Stream s;
    EXPECT_EQ(s.push("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
              "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamDecode, EmojiSplitOverTwoPushesIsHeldThenEmitted) {
    Utf8Stream s;
    EXPECT_EQ(s.push("a\xF0\x9F"), "a");
    EXPECT_EQ(s.push("\x98\x80z"), "\xF0\x9F\x98\x80z");
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamDecode, CharacterSplitByteByByte) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xE2"), "");
    EXPECT_EQ(s.push("\x82"), "");
    EXPECT_EQ(s.push("\xAC"), "\xE2\x82\xAC");
    EXPECT_EQ(s.push("\xF0"), "");
    EXPECT_EQ(s.push("\x9F"), "");
    EXPECT_EQ(s.push("\x98"), "");
    EXPECT_EQ(s.push("\x80"), "\xF0\x9F\x98\x80");
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamDecode, InvalidBytesBecomeReplacementCharacters) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xFF"), kFFFD);
    EXPECT_EQ(s.push("a\x80"
                     "b"),
              "a" + kFFFD + "b");                              // lone continuation byte
    EXPECT_EQ(s.push("\xC0\xAF"), kFFFD + kFFFD);              // overlong lead C0
    EXPECT_EQ(s.push("\xC3(x"), kFFFD + "(x");                 // lead then non-continuation
    EXPECT_EQ(s.push("\xE0\x80\x80"), kFFFD + kFFFD + kFFFD);  // overlong 3-byte form
    EXPECT_EQ(s.push("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // UTF-16 surrogate D800
    EXPECT_EQ(s.push("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);  // > U+10FFFF
    EXPECT_EQ(s.push("\xF5"), kFFFD);
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamDecode, ResetDropsHeldBackBytes) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xF0\x9F"), "");
    s.reset();
    EXPECT_FALSE(s.pending());
    EXPECT_EQ(s.push("ok"), "ok");
    EXPECT_EQ(s.flush(), "");
}

TEST(Utf8StreamDecode, ValidAfterInvalidResynchronizes) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\x80\xC3\xA9"), kFFFD + "\xC3\xA9");
}

TEST(Utf8StreamDecode, FlushOfADanglingLeadIsOneReplacement) {
    Utf8Stream s;
    EXPECT_EQ(s.push("ok\xE2\x82"), "ok");
    EXPECT_TRUE(s.pending());
    EXPECT_EQ(s.flush(), kFFFD);
    EXPECT_FALSE(s.pending());
    // The stream is empty again afterwards.
    EXPECT_EQ(s.flush(), "");
    EXPECT_EQ(s.push("x"), "x");

    Utf8Stream t;
    EXPECT_EQ(t.push("\xF0"), "");
    EXPECT_EQ(t.flush(), kFFFD);
}

// A truncated sequence followed by a non-continuation byte is one maximal subpart: one U+FFFD,
// as Python's errors="replace" and Rust's from_utf8_lossy give, and as flush() gives for the
// same prefix at the end of the stream.
TEST(Utf8StreamDecode, TruncatedSequenceIsOneReplacement) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xE2\x82"
                     "A"),
              kFFFD + "A");
    EXPECT_EQ(s.push("\xF0\x9F\x98"
                     "B"),
              kFFFD + "B");
    EXPECT_EQ(s.flush(), "");
}

}  // namespace
}  // namespace neural
