#include "util/clock.h"

namespace kiln {

namespace {

class RealClock : public Clock {
public:
  std::chrono::system_clock::time_point wall() const override {
    return std::chrono::system_clock::now();
  }
  std::chrono::steady_clock::time_point steady() const override {
    return std::chrono::steady_clock::now();
  }
  bool sleep_for(std::chrono::milliseconds duration, const CancelToken& cancel) const override {
    return cancel.sleep_for(duration);
  }
};

} // namespace

const Clock& real_clock() {
  static const RealClock clock;
  return clock;
}

} // namespace kiln
