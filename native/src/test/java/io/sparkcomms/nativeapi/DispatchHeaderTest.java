package io.sparkcomms.nativeapi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The generated dispatcher and Java binding must cover every function of the C ABI: run
 * {@code native/gen-dispatch.py} after changing sparkcomms.h. And without a GPU the loader must say
 * why the backend is unavailable instead of failing obscurely.
 */
class DispatchHeaderTest {
  static List<String> abiFunctions() throws Exception {
    String h = Files.readString(Path.of("src/main/cpp/include/sparkcomms.h"));
    Matcher m = Pattern.compile("SC_API\\s+[^;(]*?\\b(sc_\\w+)\\s*\\(").matcher(h);
    List<String> names = new ArrayList<>();
    while (m.find()) names.add(m.group(1));
    return names;
  }

  @Test void generatedFilesCoverTheWholeAbi() throws Exception {
    List<String> fns = abiFunctions();
    assertTrue(fns.size() > 40, "parsed " + fns);
    String dispatch = Files.readString(Path.of("src/main/cpp/dispatch/sparkcomms_dispatch.h"));
    String java = Files.readString(Path.of("src/main/java/io/sparkcomms/nativeapi/SparkCommsNative.java"));
    for (String f : fns) {
      assertTrue(dispatch.contains("dlsym(h, \"" + f + "\")"), f + " missing from sparkcomms_dispatch.h: run native/gen-dispatch.py");
      assertTrue(java.contains(" " + f + "("), f + " missing from SparkCommsNative.java: run native/gen-dispatch.py");
    }
  }

  @Test void loaderExplainsWhyTheGpuBackendIsUnavailable() {
    GpuLibrary.Status s = GpuLibrary.status();
    if (s.available()) {
      assertTrue(s.runtimeInfo().startsWith("cuda") || s.runtimeInfo().startsWith("hip"), s.runtimeInfo());
      return;
    }
    assertFalse(s.reason().isBlank());
    assertTrue(s.reason().startsWith("GPU backend unavailable: "), s.reason());
    assertEquals(false, GpuLibrary.available());
  }
}
