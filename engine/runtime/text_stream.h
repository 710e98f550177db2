// Turns a stream of token bytes into complete UTF-8 text: a multi-byte character split across
// tokens is held back until it completes; bytes that can never form valid UTF-8 become U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace neural {

class Utf8Stream {
 public:
  // Appends bytes; returns the text that is now complete.
  std::string push(std::string_view bytes);
  // End of stream: whatever is held back is emitted (invalid tails as U+FFFD).
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace neural
