#pragma once
// What to do with a partial file when the server answers a request that asked for the rest of
// it (Range: bytes=<have>-). Pure rules, so every answer a server may give is tested:
//   206 with Content-Range "bytes <have>-<end>/<total>"  -> append (the rest follows)
//   206 starting anywhere else, or unparsable            -> discard the partial, start again
//   200                                                  -> the server ignored Range: the body
//                                                           is the whole file, write it from 0
//   416 with "bytes */<have>"                            -> the partial is already the file
//   416 otherwise                                        -> discard the partial, start again
#include <cstdint>
#include <optional>
#include <string_view>

namespace mrcnn::download {

enum class ResumeAction {
  kAppend,     // keep the partial, write the body after it
  kFromStart,  // truncate the partial, the body is the whole file
  kComplete,   // the partial is the whole file; read no body
  kDiscard,    // remove the partial and ask again from byte 0
  kNotABody,   // any other status: not for these rules (redirects, errors)
};

struct ResumePlan {
  ResumeAction action = ResumeAction::kNotABody;
  std::optional<uint64_t> total;  // the file's whole size, when the answer tells it
};

// `have`: bytes already in the partial (0: the request had no Range). `content_length`: the
// answer's body size, if it has one. `content_range`: the Content-Range header ("" if none).
ResumePlan PlanResume(uint64_t have, unsigned status, std::optional<uint64_t> content_length,
                      std::string_view content_range);

// "bytes <first>-<last>/<total or *>" or "bytes */<total>" (RFC 9110 section 14.4).
struct ContentRange {
  std::optional<uint64_t> first, last;  // absent in the "*/total" form
  std::optional<uint64_t> total;        // absent when '*'
};
std::optional<ContentRange> ParseContentRange(std::string_view header);

}  // namespace mrcnn::download
