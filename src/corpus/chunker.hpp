// Splitting C/C++/CUDA source into chunks along function boundaries, for the training corpus.
//
// The splitter matches braces on a masked copy of the source, in which comments, the contents of
// string and character literals (raw strings included) and preprocessor lines are blanked, so a
// brace in a comment, a string or a macro never counts. A top-level unit ends at the '}' that
// closes a top-level block (a function, a class, an enum; a following ';' comes along) or at a ';'
// at top level (a declaration). `namespace X {` and `extern "C" {` blocks are transparent: the
// functions inside them are top-level units. Units are packed into chunks: a chunk ends after a
// block once it holds at least min_chars; declarations, comments and #include lines before a
// function stay with it. A unit longer than max_chars is cut at line ends at the shallowest brace
// depth (the latest such line end within max_chars); a line longer than max_chars is cut at a
// UTF-8 character boundary. Unbalanced braces (e.g. #if branches that each open a block) never
// lose text: every byte of the input is in exactly one chunk, apart from whitespace trimmed at
// chunk ends.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kforge {

struct ChunkOptions {
  size_t max_chars = 8000;
  size_t min_chars = 256;
};

// `source` with comments, literal contents and preprocessor lines replaced by spaces (newlines
// kept, so offsets and line numbers match); string literals keep their quotes and become "x...x".
std::string mask_source(std::string_view source);

struct SourceChunk {
  size_t begin = 0, end = 0;  // byte range in the source (after trimming whitespace)
  int first_line = 1, last_line = 1;
  std::string text;
};

std::vector<SourceChunk> split_chunks(std::string_view source, const ChunkOptions& opts = {});

}  // namespace kforge
