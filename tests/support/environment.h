// Setting the process environment from a test, the same way on POSIX and Windows.
#pragma once

namespace neural::test {

// setenv / unsetenv (value null) on POSIX, _putenv_s on Windows; child processes inherit it.
void set_env(const char* name, const char* value);

}  // namespace neural::test
