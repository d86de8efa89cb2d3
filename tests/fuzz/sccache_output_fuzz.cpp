// kiln-cc's reading of what `sccache <compiler> ...` printed: the classes of sccache's own
// failures, and the holder that passes the compiler's output on. The input is a bundle
// (fuzz_bundle.h) of `<name>.stdout`, `<name>.stderr` and `<name>.rc`, as the recordings in
// tests/fixtures/sccache-0.4 are; before the first header: stderr. Whatever arrives, in
// whatever pieces, the holder passes on every byte but sccache's own two notes, in order.
#include <charconv>
#include <cstdlib>

#include "compilecache/sccache_output.h"
#include "fuzz_bundle.h"

namespace {

using namespace kiln::cc;

std::string_view file_ending(const std::vector<kiln::fuzz::BundleFile>& files,
                             std::string_view ending) {
  for (const auto& file : files) {
    if (file.name.ends_with(ending)) {
      return file.content;
    }
  }
  return {};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto files = kiln::fuzz::split_bundle(kiln::fuzz::as_text(data, size), "sccache.stderr");
  std::string_view out = file_ending(files, "stdout");
  std::string_view err = file_ending(files, "stderr");
  std::string_view rc = file_ending(files, "rc");
  int exit_code = 1;
  std::from_chars(rc.data(), rc.data() + rc.size(), exit_code);

  (void)find_own_failure(out, err, exit_code);
  (void)local_compile_warning_length(err);

  // The pieces: sizes cycle through the rc file's bytes, so the fuzzer picks where reads end.
  std::string passed_out;
  std::string passed_err;
  SccacheOutput output(
      [&](Stream stream, std::string_view bytes) {
        (stream == Stream::out ? passed_out : passed_err).append(bytes);
      },
      64 + rc.size() * 8);
  size_t out_at = 0;
  size_t err_at = 0;
  for (size_t turn = 0; out_at < out.size() || err_at < err.size(); ++turn) {
    size_t piece = 1 + (rc.empty() ? 4096 : static_cast<unsigned char>(rc[turn % rc.size()]));
    if (out_at < out.size()) {
      output.add(Stream::out, out.substr(out_at, piece));
      out_at += piece;
    }
    if (err_at < err.size()) {
      output.add(Stream::err, err.substr(err_at, piece));
      err_at += piece;
    }
    output.settle();
  }
  std::optional<SignalNote> note = output.finish(exit_code);
  size_t note_length = note ? note->length : 0;
  size_t warning = output.compiled_locally() ? local_compile_warning_length(err) : 0;
  if (note_length > out.size() || warning > err.size() ||
      passed_out != out.substr(0, out.size() - note_length) || passed_err != err.substr(warning)) {
    std::abort();
  }
  return 0;
}
