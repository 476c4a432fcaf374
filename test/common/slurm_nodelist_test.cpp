#include <catch2/catch.hpp>

#include "common/config_error.h"
#include "common/world.h"

using mrcnn::common::ConfigError;
using mrcnn::common::ExpandSlurmNodeList;
using Hosts = std::vector<std::string>;

TEST_CASE("slurm nodelist: plain names and lists", "[slurm]") {
  CHECK(ExpandSlurmNodeList("node1") == Hosts{"node1"});
  CHECK(ExpandSlurmNodeList("a,b,c") == Hosts{"a", "b", "c"});
}

TEST_CASE("slurm nodelist: bracket ranges and singles", "[slurm]") {
  CHECK(ExpandSlurmNodeList("algo-[1-3,5]") == Hosts{"algo-1", "algo-2", "algo-3", "algo-5"});
  CHECK(ExpandSlurmNodeList("algo-[8-11]") == Hosts{"algo-8", "algo-9", "algo-10", "algo-11"});
  CHECK(ExpandSlurmNodeList("gpu[7]") == Hosts{"gpu7"});
}

TEST_CASE("slurm nodelist: zero padding follows the lower bound", "[slurm]") {
  CHECK(ExpandSlurmNodeList("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(ExpandSlurmNodeList("n[01-02,10]") == Hosts{"n01", "n02", "n10"});
  CHECK(ExpandSlurmNodeList("n[8-10]") == Hosts{"n8", "n9", "n10"});
}

TEST_CASE("slurm nodelist: several groups, suffixes and products", "[slurm]") {
  CHECK(ExpandSlurmNodeList("a[1-2]-ib,b3,c[5,7]") == Hosts{"a1-ib", "a2-ib", "b3", "c5", "c7"});
  CHECK(ExpandSlurmNodeList("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
}

TEST_CASE("slurm nodelist: malformed lists are ConfigErrors naming SLURM_JOB_NODELIST", "[slurm]") {
  for (const char* bad : {"algo-[1-3", "algo-1-3]", "algo-[3-1]", "algo-[a-b]", "algo-[]",
                          "algo-[1-2,]", "a,,b", "a[[1]]", "", "n[1-999999999]"}) {
    INFO(bad);
    try {
      ExpandSlurmNodeList(bad);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK(e.field() == "SLURM_JOB_NODELIST");
    }
  }
}
