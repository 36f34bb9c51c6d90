// dlopen of the first loadable of several library names (the vendor collective library, the BLAS):
// one place for the search and for the text that says why none loaded.
#pragma once

#include <dlfcn.h>

#include <string>

// The handle of the first of cands[0..n) that dlopen loads (null and empty names skipped), its name
// in *name; null when none loads, with "name: reason; " for each tried appended to *errs.
static void* sc_dlopen_first(const char* const* cands, size_t n, const char** name, std::string* errs) {
  for (size_t i = 0; i < n; i++) {
    const char* c = cands[i];
    if (!c || !*c) continue;
    void* h = dlopen(c, RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *name = c;
      return h;
    }
    const char* de = dlerror();
    *errs += std::string(c) + ": " + (de ? de : "?") + "; ";
  }
  return nullptr;
}
