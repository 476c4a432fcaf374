// The md5 of a file, read in pieces (one larger than a piece here).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "download/file_md5.h"

namespace mrcnn::download {

TEST_CASE("a file's md5 is the md5 of its bytes", "[download]") {
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp");
  const std::filesystem::path empty = dir / "md5_empty.bin";
  const std::filesystem::path large = dir / "md5_large.bin";
  std::ofstream(empty).close();
  {
    std::ofstream out(large, std::ios::binary);
    const std::string piece(1 << 20, 'a');
    out << piece << piece << "tail";
  }
  CHECK(Md5HexOfFile(empty) == "d41d8cd98f00b204e9800998ecf8427e");
  const std::string md5 = Md5HexOfFile(large);
  std::filesystem::remove(empty);
  std::filesystem::remove(large);
  // python3 -c "import hashlib; print(hashlib.md5(b'a' * 2**21 + b'tail').hexdigest())"
  CHECK(md5 == "7f915a9151f02c2bcc76c2aca6c885b0");
  CHECK_THROWS_WITH(Md5HexOfFile(dir / "md5_missing.bin"), Catch::Contains("md5_missing.bin"));
}

}  // namespace mrcnn::download
