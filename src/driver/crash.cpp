#include "driver/crash.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "driver/run_loop.h"
#include "util/diagnostic.h"

namespace kiln {

namespace {

std::mutex g_mutex;
std::function<void(const std::string&)> g_recorder;

std::string current_reason() {
  std::exception_ptr error = std::current_exception();
  if (!error) {
    return "std::terminate was called without an exception";
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

[[noreturn]] void on_terminate() {
  report_crash(current_reason());
  std::_Exit(k_exit_crash);
}

} // namespace

void set_crash_recorder(std::function<void(const std::string&)> recorder) {
  std::lock_guard lock(g_mutex);
  g_recorder = std::move(recorder);
}

int report_crash(const std::string& reason) {
  std::function<void(const std::string&)> recorder;
  {
    std::lock_guard lock(g_mutex);
    recorder = std::exchange(g_recorder, nullptr); // a crash while recording ends at once
  }
  if (recorder) {
    recorder(reason); // says where the record is
  } else {
    std::fprintf(stderr, "kiln: internal error: %s; nothing was recorded\n",
                 printable(reason).c_str());
  }
  return k_exit_crash;
}

void install_crash_handler() {
  std::set_terminate(on_terminate);
}

} // namespace kiln
