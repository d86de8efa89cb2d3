#pragma once

#include <string>

namespace kiln::testing {

// Dockerfiles of n repetitions of one shape that used to make the parser or lint quadratic,
// for the tests that run them large and the benchmark that fits their growth.

/// One RUN continued over n lines, each with a flag (`--a=b \`).
std::string flag_on_every_continuation_line(int n);
/// n ARG lines (A0..), then a RUN in a second stage using the last, declared only in the first:
/// one finding, on the last line.
std::string arg_lines(int n);
/// n names declared in one stage and used in the next: n findings.
std::string out_of_scope_references(int n);
/// One ENV value of n references (`$N0$N1...`) that name no build-host value.
std::string references_in_one_env_value(int n);
/// One ENV line of n variables, each a URL on a private address: n findings on one line.
std::string private_address_variables(int n);
/// One ENV value listing n private addresses.
std::string addresses_in_one_value(int n);
/// n ARGs, then one COPY using n names each one edit from a declared one: n undefined-var
/// findings whose "did you mean" search could compare every pair.
std::string near_miss_references(int n);

} // namespace kiln::testing
