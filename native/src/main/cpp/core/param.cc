#include "param.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <initializer_list>

namespace {

const ScParamInfo kParams[SC_NPARAMS] = {
#define SIZE SC_PK_SIZE
#define COUNT SC_PK_COUNT
#define FLAG SC_PK_FLAG
#define FP8 SC_PK_FP8
#define AGREE SC_PF_AGREE
#define AGREE_LP SC_PF_AGREE_LP
#define CREATE SC_PF_CREATE
#define SC_PARAM(name, env, kind, d2, d4, d8, lo, hi, step, flags, doc) \
  {#name, env, kind, {d2, d4, d8}, lo, hi, step, flags, doc},
#include "params.def"
#undef SC_PARAM
#undef SIZE
#undef COUNT
#undef FLAG
#undef FP8
#undef AGREE
#undef AGREE_LP
#undef CREATE
};

// [begin, end) of `text` without surrounding blanks.
void trim(const char* text, const char** b, const char** e) {
  const char* s = text;
  while (*s && isspace((unsigned char)*s)) ++s;
  const char* t = s + strlen(s);
  while (t > s && isspace((unsigned char)t[-1])) --t;
  *b = s;
  *e = t;
}

bool word_is(const char* b, const char* e, const char* w) {
  const size_t n = (size_t)(e - b);
  return strlen(w) == n && strncasecmp(b, w, n) == 0;
}

}  // namespace

const ScParamInfo& sc_param_info(int id) { return kParams[id]; }

int sc_param_find(const char* key) {
  for (int i = 0; key && i < SC_NPARAMS; ++i)
    if (!strcmp(kParams[i].name, key)) return i;
  return -1;
}

int sc_parse_size(const char* text, long long* out) {
  const char *b, *e;
  trim(text ? text : "", &b, &e);
  if (b == e) return 0;
  long long mult = 1;
  switch (e[-1]) {
    case 'k': case 'K': mult = 1ll << 10; --e; break;
    case 'm': case 'M': mult = 1ll << 20; --e; break;
    case 'g': case 'G': mult = 1ll << 30; --e; break;
    default: break;
  }
  if (b == e) return -1;
  unsigned long long v = 0;
  for (const char* s = b; s < e; ++s) {
    if (*s < '0' || *s > '9') return -1;
    const unsigned d = (unsigned)(*s - '0');
    if (v > (9223372036854775807ull - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (v > 9223372036854775807ull / (unsigned long long)mult) return -1;
  *out = (long long)(v * (unsigned long long)mult);
  return 1;
}

int sc_parse_flag(const char* text, long long* out) {
  const char *b, *e;
  trim(text ? text : "", &b, &e);
  if (b == e) return 0;
  if (word_is(b, e, "1") || word_is(b, e, "true") || word_is(b, e, "on")) { *out = 1; return 1; }
  if (word_is(b, e, "0") || word_is(b, e, "false") || word_is(b, e, "off")) { *out = 0; return 1; }
  return -1;
}

int sc_parse_fp8(const char* text, long long* out) {
  const char *b, *e;
  trim(text ? text : "", &b, &e);
  if (b == e) return 0;
  if (word_is(b, e, "e4m3fn") || word_is(b, e, "fn")) { *out = 0; return 1; }
  if (word_is(b, e, "e4m3fnuz") || word_is(b, e, "fnuz")) { *out = 1; return 1; }
  return -1;
}

bool sc_param_accepts(int id, long long v, char* why, size_t why_len) {
  const ScParamInfo& p = kParams[id];
  if (v >= p.lo && v <= p.hi && (v - p.lo) % p.step == 0) return true;
  switch (p.kind) {
    case SC_PK_FLAG: snprintf(why, why_len, "0 or 1"); break;
    case SC_PK_FP8: snprintf(why, why_len, "0 (e4m3fn) or 1 (e4m3fnuz)"); break;
    default:
      if (p.lo == p.hi) snprintf(why, why_len, "only %lld", p.lo);
      else if (p.step > 1) snprintf(why, why_len, "a multiple of %lld in %lld..%lld", p.step, p.lo, p.hi);
      else snprintf(why, why_len, "%lld..%lld", p.lo, p.hi);
  }
  return false;
}

int sc_params_init(ScParams* p, int nranks, char* err, size_t err_len) {
  const int col = nranks <= 2 ? 0 : nranks <= 4 ? 1 : 2;
  for (int i = 0; i < SC_NPARAMS; ++i) p->v[i] = kParams[i].def[col];
  for (int i = 0; i < SC_NPARAMS; ++i) {
    const ScParamInfo& d = kParams[i];
    const char* text = d.env ? getenv(d.env) : nullptr;
    if (!text) continue;
    long long v = 0;
    const int r = d.kind == SC_PK_FLAG ? sc_parse_flag(text, &v) : d.kind == SC_PK_FP8 ? sc_parse_fp8(text, &v)
                                                                                       : sc_parse_size(text, &v);
    if (r == 0) continue;
    char why[96];
    if (r < 0) {
      const char* what = d.kind == SC_PK_FLAG ? "0/1/true/false/on/off"
                         : d.kind == SC_PK_FP8 ? "e4m3fn or e4m3fnuz"
                                               : "digits with an optional K, M or G suffix";
      snprintf(err, err_len, "%s=\"%s\": not a valid value (%s: %s)", d.env, text, d.name, what);
      return -1;
    }
    if (!sc_param_accepts(i, v, why, sizeof why)) {
      snprintf(err, err_len, "%s=\"%s\": %s takes %s", d.env, text, d.name, why);
      return -1;
    }
    p->v[i] = v;
  }
  // The per-collective LP switches follow RCCL_LOW_PRECISION_ENABLE unless set themselves.
  for (int i : {SC_P_lp_allreduce, SC_P_lp_allgather, SC_P_lp_reducescatter, SC_P_lp_alltoall})
    if (p->v[i] < 0) p->v[i] = p->lp_enable;
  return 0;
}

void sc_params_agreed(const ScParams* p, uint64_t out[SC_NPARAMS]) {
  const bool any_lp = p->lp_allreduce || p->lp_allgather || p->lp_reducescatter || p->lp_alltoall;
  for (int i = 0; i < SC_NPARAMS; ++i) {
    const int f = kParams[i].flags;
    const bool agree = (f & SC_PF_AGREE) || ((f & SC_PF_AGREE_LP) && any_lp);
    out[i] = agree ? (uint64_t)p->v[i] : 0;
  }
}
