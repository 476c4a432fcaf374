// What a partial file becomes after each answer a server may give to a Range request.
#include <catch2/catch.hpp>

#include "download/resume_plan.h"

namespace mrcnn::download {

TEST_CASE("Content-Range headers parse in both forms", "[download]") {
  const auto a = ParseContentRange("bytes 100-199/200");
  REQUIRE(a);
  CHECK(*a->first == 100);
  CHECK(*a->last == 199);
  CHECK(*a->total == 200);
  const auto b = ParseContentRange("bytes */200");
  REQUIRE(b);
  CHECK_FALSE(b->first.has_value());
  CHECK(*b->total == 200);
  CHECK_FALSE(ParseContentRange("bytes 5-9/*")->total.has_value());
  CHECK_FALSE(ParseContentRange("").has_value());
  CHECK_FALSE(ParseContentRange("bytes 9-5/20").has_value());
  CHECK_FALSE(ParseContentRange("bytes 5-20/20").has_value());
  CHECK_FALSE(ParseContentRange("items 1-2/3").has_value());
  CHECK_FALSE(ParseContentRange("bytes */*").has_value());
}

TEST_CASE("a fresh request's 200 is the whole file", "[download]") {
  const ResumePlan plan = PlanResume(0, 200, 1000, "");
  CHECK(plan.action == ResumeAction::kFromStart);
  CHECK(plan.total == 1000u);
  CHECK_FALSE(PlanResume(0, 200, std::nullopt, "").total.has_value());
}

TEST_CASE("206 from where the partial ends is appended", "[download]") {
  const ResumePlan plan = PlanResume(400, 206, 600, "bytes 400-999/1000");
  CHECK(plan.action == ResumeAction::kAppend);
  CHECK(plan.total == 1000u);
  CHECK(PlanResume(400, 206, 600, "bytes 400-999/*").total == 1000u);
}

TEST_CASE("a server that ignores Range (200) restarts the file", "[download]") {
  const ResumePlan plan = PlanResume(400, 200, 1000, "");
  CHECK(plan.action == ResumeAction::kFromStart);
  CHECK(plan.total == 1000u);
}

TEST_CASE("206 from elsewhere, or without a usable Content-Range, discards the partial",
          "[download]") {
  CHECK(PlanResume(400, 206, 500, "bytes 500-999/1000").action == ResumeAction::kDiscard);
  CHECK(PlanResume(400, 206, 600, "").action == ResumeAction::kDiscard);
  CHECK(PlanResume(0, 206, 600, "bytes 0-599/600").action == ResumeAction::kDiscard);
}

TEST_CASE("416 means done when the partial is the whole file, else start again", "[download]") {
  const ResumePlan done = PlanResume(1000, 416, 0, "bytes */1000");
  CHECK(done.action == ResumeAction::kComplete);
  CHECK(done.total == 1000u);
  CHECK(PlanResume(1200, 416, 0, "bytes */1000").action == ResumeAction::kDiscard);
  CHECK(PlanResume(1000, 416, 0, "").action == ResumeAction::kDiscard);
}

TEST_CASE("other statuses are not bodies", "[download]") {
  for (unsigned status : {301u, 302u, 403u, 404u, 500u, 503u}) {
    INFO(status);
    CHECK(PlanResume(0, status, 10, "").action == ResumeAction::kNotABody);
    CHECK(PlanResume(5, status, 10, "").action == ResumeAction::kNotABody);
  }
}

}  // namespace mrcnn::download
