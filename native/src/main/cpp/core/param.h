// The parameter table (params.def) as code: one value per knob in ScParams, and everything that
// reads or writes them — defaults per rank count, the environment, sc_comm_set_option /
// sc_comm_get_option, the cross-rank agreement at connect and the names in error messages.
// Host C++ only (no GPU runtime): the grammar is tested on its own (param_test.cc).
#pragma once

#include <stddef.h>
#include <stdint.h>

enum ScParamKind { SC_PK_SIZE, SC_PK_COUNT, SC_PK_FLAG, SC_PK_FP8 };
enum ScParamFlags { SC_PF_AGREE = 1, SC_PF_AGREE_LP = 2, SC_PF_CREATE = 4 };

enum ScParamId {
#define SC_PARAM(name, env, kind, d2, d4, d8, lo, hi, step, flags, doc) SC_P_##name,
#include "params.def"
#undef SC_PARAM
  SC_NPARAMS
};

struct ScParamInfo {
  const char* name;
  const char* env;
  ScParamKind kind;
  long long def[3];  // up to 2 ranks, up to 4, above 4
  long long lo, hi, step;
  int flags;
  const char* doc;
};

// Every knob's value, by name (c->p.flat_max_bytes) or by id (c->p.v[SC_P_flat_max_bytes]).
union ScParams {
  struct {
#define SC_PARAM(name, env, kind, d2, d4, d8, lo, hi, step, flags, doc) long long name;
#include "params.def"
#undef SC_PARAM
  };
  long long v[SC_NPARAMS];
};

const ScParamInfo& sc_param_info(int id);
int sc_param_find(const char* key);  // id, or -1

// The grammar of setting values (native/src/test/resources/setting-values.tsv): sizes and counts
// are digits with an optional K/M/G suffix (powers of 1024, either case); flags are
// 0/1/true/false/on/off (any case); fp8 formats e4m3fn/e4m3fnuz (or fn/fnuz). Blanks around the
// value are ignored. Returns 1 with *out set, 0 for an empty value (not set), -1 when malformed.
int sc_parse_size(const char* text, long long* out);
int sc_parse_flag(const char* text, long long* out);
int sc_parse_fp8(const char* text, long long* out);

// Whether `v` is an accepted value of parameter `id`; else writes what is accepted into why.
bool sc_param_accepts(int id, long long v, char* why, size_t why_len);

// Defaults for `nranks`, then the environment (getenv). Returns 0, or -1 with the offending
// variable, its value and what it accepts in err.
int sc_params_init(ScParams* p, int nranks, char* err, size_t err_len);

// The values ranks must agree on, in table order (0 where a value does not matter).
void sc_params_agreed(const ScParams* p, uint64_t out[SC_NPARAMS]);
