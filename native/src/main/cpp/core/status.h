// Status and errors of the C ABI: a thread-local text for the last failure (sc_last_error) and
// the early-return macro every entry point uses.
#pragma once

#include <stddef.h>

#include "../include/sparkcomms.h"

int sc_fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* sc_error_text();  // this thread's last failure (the text sc_last_error returns)
void sc_set_error_text(const char* text);

#define SC_TRY(expr)              \
  do {                            \
    int rc_ = (expr);             \
    if (rc_ != SC_OK) return rc_; \
  } while (0)

// Bytes per element of a SC_* dtype, 0 for an unknown one.
inline size_t sc_dtype_size(int dt) {
  switch (dt) {
    case SC_FLOAT32: return 4;
    case SC_BFLOAT16: return 2;
    case SC_FLOAT16: return 2;
    case SC_FLOAT64: return 8;
    case SC_INT32: return 4;
    case SC_INT64: return 8;
    default: return 0;
  }
}
inline bool sc_is_int(int dt) { return dt == SC_INT32 || dt == SC_INT64; }
