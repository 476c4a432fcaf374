#pragma once
// Field readers shared by the COCO annotation reader and the results reader: a value of the
// wrong type is recorded as a problem of the item (first one wins) and skipped, so a bad
// item can be reported and dropped without stopping the whole file.
#include <optional>
#include <string>
#include <string_view>

#include "trainer/data/coco_dataset.h"
#include "trainer/data/json_cursor.h"

namespace mrcnn::data {

std::optional<double> ReadNumberField(JsonCursor& cur, std::string_view key, std::string* problem);
std::optional<int64_t> ReadIntegerField(JsonCursor& cur, std::string_view key,
                                        std::string* problem);
// A "segmentation" value: polygons, an RLE object (compressed or not), or null.
CocoSegmentation ReadSegmentationField(JsonCursor& cur, std::string* problem);

}  // namespace mrcnn::data
