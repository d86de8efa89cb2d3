#include "dockerfile/declared_args.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using Names = std::vector<std::string>;

Names declared_args(std::string_view text) {
  auto parsed = parse_dockerfile(text);
  EXPECT_TRUE(parsed) << parsed.error().message;
  return parsed ? kiln::declared_args(*parsed) : Names{};
}

TEST(DeclaredArgs, GlobalAndStageArgsUniqueInFirstSeenOrder) {
  EXPECT_EQ(declared_args("ARG BASE\n"
                          "FROM ${BASE}\n"
                          "ARG VERSION=1.0\n"
                          "RUN make\n"
                          "FROM scratch\n"
                          "ARG BASE\n"
                          "ARG EXTRA\n"),
            (Names{"BASE", "VERSION", "EXTRA"}));
}

TEST(DeclaredArgs, KeywordIsCaseInsensitive) {
  EXPECT_EQ(declared_args("arg LOWER\nArg MIXED\n  ARG INDENTED\n"),
            (Names{"LOWER", "MIXED", "INDENTED"}));
}

TEST(DeclaredArgs, OnlyArgInstructionsCount) {
  EXPECT_EQ(declared_args("FROM scratch\n"
                          "# ARG COMMENTED\n"
                          "ENV NOT_ARG=1\n"
                          "RUN echo ARG NOPE\n"
                          "LABEL ARG=x\n"),
            Names{});
}

TEST(DeclaredArgs, SeveralNamesPerArg) {
  EXPECT_EQ(declared_args("ARG A B=2 C\n"), (Names{"A", "B", "C"}));
}

TEST(DeclaredArgs, QuotedDefaultsMayHoldSpaces) {
  EXPECT_EQ(declared_args("ARG A=\"x y\" B\n"
                          "ARG C='p q=r' D=\"say \\\"hi there\\\"\" E\n"),
            (Names{"A", "B", "C", "D", "E"}));
}

TEST(DeclaredArgs, ContinuationSkipsCommentsAndEmptyLines) {
  EXPECT_EQ(declared_args("ARG A=1 \\\n"
                          "    # a comment inside the instruction\n"
                          "\n"
                          "    B=2\n"
                          "RUN echo \\\n"
                          "ARG SWALLOWED_BY_RUN\n"
                          "ARG C\n"),
            (Names{"A", "B", "C"}));
}

TEST(DeclaredArgs, ContinuationWithTrailingBlanksAfterEscape) {
  EXPECT_EQ(declared_args("ARG A \\  \n  B\n"), (Names{"A", "B"}));
}

TEST(DeclaredArgs, BacktickEscapeDirective) {
  EXPECT_EQ(declared_args("# escape=`\n"
                          "FROM scratch\n"
                          "ARG A=1 `\n"
                          "    B=2\n"
                          "RUN dir c:\\\n"
                          "ARG C\n"),
            (Names{"A", "B", "C"}));
}

TEST(DeclaredArgs, DirectiveNamesAreCaseInsensitiveAndFollowOtherDirectives) {
  EXPECT_EQ(declared_args("# syntax=docker/dockerfile:1\n"
                          "#  ESCAPE = `\n"
                          "RUN echo \\\n"
                          "ARG A\n"),
            (Names{"A"}));
}

TEST(DeclaredArgs, DirectiveAfterTheTopIsAComment) {
  // The blank line ends the directives: backslash stays the escape character.
  EXPECT_EQ(declared_args("\n"
                          "# escape=`\n"
                          "RUN echo \\\n"
                          "ARG SWALLOWED\n"
                          "ARG A\n"),
            (Names{"A"}));
}

TEST(DeclaredArgs, HeredocBodyIsSkipped) {
  EXPECT_EQ(declared_args("FROM scratch\n"
                          "RUN <<EOF\n"
                          "ARG FAKE\n"
                          "EOF\n"
                          "ARG REAL\n"),
            (Names{"REAL"}));
}

TEST(DeclaredArgs, QuotedHeredocWords) {
  EXPECT_EQ(declared_args("RUN <<\"EOT\" bash\n"
                          "ARG FAKE1\n"
                          "EOT\n"
                          "RUN python3 <<'PY'\n"
                          "ARG FAKE2\n"
                          "PY\n"
                          "ARG REAL\n"),
            (Names{"REAL"}));
}

TEST(DeclaredArgs, DashHeredocEndsAtTabIndentedWord) {
  EXPECT_EQ(declared_args("RUN <<-EOT\n"
                          "\tARG FAKE\n"
                          "\tEOT\n"
                          "ARG REAL\n"),
            (Names{"REAL"}));
}

TEST(DeclaredArgs, PlainHeredocNeedsAnUnindentedWord) {
  // Without `-`, a tab-indented EOT is body, so the heredoc runs on to the bare EOT.
  EXPECT_EQ(declared_args("RUN <<EOT\n"
                          "\tEOT\n"
                          "ARG FAKE\n"
                          "EOT\n"
                          "ARG REAL\n"),
            (Names{"REAL"}));
}

TEST(DeclaredArgs, TwoHeredocsOnOneLineAreConsumedInOrder) {
  EXPECT_EQ(declared_args("COPY <<FIRST <<\"SECOND\" /dst/\n"
                          "ARG FAKE_FIRST\n"
                          "FIRST\n"
                          "ARG FAKE_SECOND\n"
                          "SECOND\n"
                          "ARG REAL\n"),
            (Names{"REAL"}));
}

TEST(DeclaredArgs, HeredocAfterContinuation) {
  EXPECT_EQ(declared_args("RUN \\\n"
                          "  cat <<EOF\n"
                          "ARG FAKE\n"
                          "EOF\n"
                          "ARG REAL\n"),
            (Names{"REAL"}));
}

TEST(DeclaredArgs, HereStringsAndShiftsAreNotHeredocs) {
  EXPECT_EQ(declared_args("RUN cat <<<\"x\"\n"
                          "ARG A\n"
                          "RUN echo $((1<<2))\n"
                          "ARG B\n"),
            (Names{"A", "B"}));
}

TEST(DeclaredArgs, CrlfLineEnds) {
  EXPECT_EQ(declared_args("ARG A \\\r\n  B\r\nRUN <<EOF\r\nARG FAKE\r\nEOF\r\nARG C\r\n"),
            (Names{"A", "B", "C"}));
}

TEST(DeclaredArgs, AHeredocMarkerOutsideRunCopyAndAddIsText) {
  // BuildKit reads heredocs in RUN, COPY and ADD only: in a LABEL, `<<EOF` is part of a value,
  // and the lines after it are instructions.
  EXPECT_EQ(declared_args("FROM scratch\n"
                          "LABEL usage=\"pipe a script in with <<EOF\"\n"
                          "ENV NOTE=<<EOT\n"
                          "ARG VERSION\n"
                          "ARG REAL\n"),
            (Names{"VERSION", "REAL"}));
}

} // namespace
} // namespace kiln
