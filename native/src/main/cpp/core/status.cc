#include "status.h"

#include <stdarg.h>
#include <stdio.h>

#include <string>

static thread_local std::string g_last_error;

int sc_fail(int code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_last_error = buf;
  return code;
}

const char* sc_error_text() { return g_last_error.c_str(); }
void sc_set_error_text(const char* text) { g_last_error = text; }

extern "C" const char* sc_last_error(void) { return g_last_error.c_str(); }

extern "C" const char* sc_status_name(int s) {
  switch (s) {
    case SC_OK: return "SC_OK";
    case SC_ERR_INVALID_ARG: return "SC_ERR_INVALID_ARG";
    case SC_ERR_RUNTIME: return "SC_ERR_RUNTIME";
    case SC_ERR_UNSUPPORTED: return "SC_ERR_UNSUPPORTED";
    case SC_ERR_TIMEOUT: return "SC_ERR_TIMEOUT";
    case SC_ERR_ABORTED: return "SC_ERR_ABORTED";
    case SC_ERR_PEER: return "SC_ERR_PEER";
    case SC_ERR_VENDOR: return "SC_ERR_VENDOR";
    case SC_ERR_STATE: return "SC_ERR_STATE";
    case SC_ERR_NO_DEVICE: return "SC_ERR_NO_DEVICE";
    case SC_ERR_MISMATCH: return "SC_ERR_MISMATCH";
    default: return "SC_ERR_UNKNOWN";
  }
}
