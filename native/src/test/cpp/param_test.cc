// The native side of the one grammar for setting values: every case of
// src/test/resources/setting-values.tsv (which the Java tests read too), plus the table's own
// invariants and the environment errors of sc_params_init. Host C++ only; run by the Maven build.
#include "core/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fstream>
#include <sstream>
#include <string>

static int failures = 0, checks = 0;
#define CHECK(cond, ...)                 \
  do {                                   \
    ++checks;                            \
    if (!(cond)) {                       \
      ++failures;                        \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");             \
    }                                    \
  } while (0)

static void check_cases(const char* path) {
  std::ifstream in(path);
  CHECK(in.good(), "cannot read %s", path);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string kind, quoted, expect;
    std::getline(f, kind, '\t');
    std::getline(f, quoted, '\t');
    std::getline(f, expect, '\t');
    CHECK(quoted.size() >= 2 && quoted.front() == '"' && quoted.back() == '"', "malformed line: %s", line.c_str());
    const std::string text = quoted.substr(1, quoted.size() - 2);
    long long v = -12345;
    int r;
    if (kind == "size") r = sc_parse_size(text.c_str(), &v);
    else if (kind == "flag") r = sc_parse_flag(text.c_str(), &v);
    else { CHECK(false, "unknown kind %s", kind.c_str()); continue; }
    ++cases;
    if (expect == "ERROR") CHECK(r == -1, "%s \"%s\": expected an error, got r=%d v=%lld", kind.c_str(), text.c_str(), r, v);
    else if (expect == "DEFAULT") CHECK(r == 0, "%s \"%s\": expected not set, got r=%d v=%lld", kind.c_str(), text.c_str(), r, v);
    else {
      const long long want = strtoll(expect.c_str(), nullptr, 10);
      CHECK(r == 1 && v == want, "%s \"%s\": expected %lld, got r=%d v=%lld", kind.c_str(), text.c_str(), want, r, v);
    }
  }
  CHECK(cases > 30, "only %d cases read from %s", cases, path);
}

static void check_table() {
  for (int i = 0; i < SC_NPARAMS; ++i) {
    const ScParamInfo& p = sc_param_info(i);
    CHECK(sc_param_find(p.name) == i, "%s: found at another index", p.name);
    CHECK(p.lo <= p.hi && p.step >= 1, "%s: empty range", p.name);
    char why[96];
    for (long long d : p.def)
      CHECK(d == -1 || sc_param_accepts(i, d, why, sizeof why), "%s: default %lld not accepted (%s)", p.name, d, why);
    CHECK(p.doc && strlen(p.doc) > 10, "%s: no doc", p.name);
    for (int j = 0; j < i; ++j)
      CHECK(!p.env || !sc_param_info(j).env || strcmp(p.env, sc_param_info(j).env), "%s and %s share %s", p.name,
            sc_param_info(j).name, p.env);
  }
  CHECK(sc_param_find("no_such_key") == -1, "unknown key found");
}

static void check_env() {
  char err[256];
  ScParams p;
  setenv("RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "256K", 1);
  CHECK(sc_params_init(&p, 2, err, sizeof err) == 0 && p.flat_max_bytes == 262144, "256K: %lld", p.flat_max_bytes);
  setenv("RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "256KB", 1);
  CHECK(sc_params_init(&p, 2, err, sizeof err) == -1 && strstr(err, "RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES"), "256KB: %s", err);
  unsetenv("RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES");
  setenv("SPARKCOMMS_PDL", "yes", 1);
  CHECK(sc_params_init(&p, 2, err, sizeof err) == -1 && strstr(err, "SPARKCOMMS_PDL"), "pdl=yes: %s", err);
  unsetenv("SPARKCOMMS_PDL");
  setenv("SPARKCOMMS_LP_THREADS", "300", 1);
  CHECK(sc_params_init(&p, 2, err, sizeof err) == -1 && strstr(err, "SPARKCOMMS_LP_THREADS"), "lp_threads=300: %s", err);
  unsetenv("SPARKCOMMS_LP_THREADS");
  setenv("RCCL_LOW_PRECISION_ENABLE", "on", 1);
  setenv("RCCL_LOW_PRECISION_ENABLE_ALLGATHER", "0", 1);
  CHECK(sc_params_init(&p, 4, err, sizeof err) == 0 && p.lp_allreduce == 1 && p.lp_allgather == 0 && p.lp_alltoall == 1,
        "lp switches: %lld %lld %lld", p.lp_allreduce, p.lp_allgather, p.lp_alltoall);
  unsetenv("RCCL_LOW_PRECISION_ENABLE");
  unsetenv("RCCL_LOW_PRECISION_ENABLE_ALLGATHER");
  CHECK(sc_params_init(&p, 2, err, sizeof err) == 0 && p.flat_max_bytes == 4ll << 20 && p.lp_allreduce == 0, "defaults 2");
  CHECK(sc_params_init(&p, 8, err, sizeof err) == 0 && p.flat_max_bytes == 256ll << 10 && p.ll_max_bytes == 64ll << 10,
        "defaults 8");
}

int main(int argc, char** argv) {
  check_cases(argc > 1 ? argv[1] : "src/test/resources/setting-values.tsv");
  check_table();
  check_env();
  printf("param_test: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
