package io.sparkcomms.nativeapi;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.Loader;

/**
 * Loads the GPU library once per JVM: the JNI dispatcher (built by JavaCPP, always present), then the
 * HIP or the CUDA flavour of sparkcomms, whichever loads on this machine. {@link #status()} says
 * which one, or exactly why neither did ("GPU backend unavailable: ...").
 *
 * <p>Search order: {@code $SPARKCOMMS_GPU_LIBRARY} (a path), then the libraries bundled in this jar
 * under {@code io/sparkcomms/nativeapi/linux-x86_64/}: {@code libsparkcomms_hip.so}, then
 * {@code libsparkcomms_cuda.so}.
 */
public final class GpuLibrary {
  private static final String[] BUNDLED = {"libsparkcomms_hip.so", "libsparkcomms_cuda.so"};
  private static volatile Status status;

  private GpuLibrary() {}

  /** Outcome of loading: which library, the runtime's description, or the reason it is unavailable. */
  public record Status(boolean available, String library, String runtimeInfo, String reason) {
    @Override public String toString() {
      return available ? "GPU backend: " + runtimeInfo + " (" + library + ")" : reason;
    }
  }

  /** Loads on first call; never throws. */
  public static Status status() {
    Status s = status;
    if (s == null) {
      synchronized (GpuLibrary.class) {
        if (status == null) status = load();
        s = status;
      }
    }
    return s;
  }

  public static boolean available() { return status().available(); }

  /** GPUs the loaded library sees (0 when the runtime cannot count them); requires the backend. */
  public static int deviceCount() {
    require();
    int[] n = new int[1];
    return SparkCommsNative.sc_device_count(n) == SparkCommsNative.SC_OK ? n[0] : 0;
  }

  /** Throws {@link IllegalStateException} with the reason when the GPU backend is unavailable. */
  public static void require() {
    Status s = status();
    if (!s.available()) throw new IllegalStateException(s.reason());
  }

  private static Status load() {
    try {
      Loader.load(SparkCommsNative.class);
    } catch (Throwable t) {
      return new Status(false, null, null, "GPU backend unavailable: the JNI library did not load: " + t);
    }
    List<String> reasons = new ArrayList<>();
    List<String> candidates = new ArrayList<>();
    String env = System.getenv("SPARKCOMMS_GPU_LIBRARY");
    if (env != null && !env.isBlank()) candidates.add(env);
    for (String name : BUNDLED) {
      try {
        File f = Loader.cacheResource(SparkCommsNative.class, Loader.getPlatform() + "/" + name);
        if (f != null) candidates.add(f.getAbsolutePath());
        else reasons.add(name + " is not bundled in this build");
      } catch (Exception e) {
        reasons.add(name + ": " + e.getMessage());
      }
    }
    for (String path : candidates) {
      if (SparkCommsNative.sc_dispatch_open(path) != 0) {
        reasons.add(SparkCommsNative.sc_dispatch_error().replace("GPU backend unavailable: ", ""));
        continue;
      }
      int[] n = new int[1];
      if (SparkCommsNative.sc_device_count(n) != SparkCommsNative.SC_OK || n[0] < 1) {
        // the library loaded but there is no usable device; a different flavour cannot help
        return new Status(false, path, null, "GPU backend unavailable: " + path + " loaded but found no GPU: "
            + SparkCommsNative.sc_last_error());
      }
      byte[] buf = new byte[256];
      SparkCommsNative.sc_runtime_info(buf, buf.length);
      return new Status(true, path, cString(buf), null);
    }
    return new Status(false, null, null, "GPU backend unavailable: " + String.join("; ", reasons));
  }

  /** A NUL-terminated C string in {@code b}. */
  public static String cString(byte[] b) {
    int n = 0;
    while (n < b.length && b[n] != 0) n++;
    return new String(b, 0, n, java.nio.charset.StandardCharsets.UTF_8);
  }

  /** Prints the status; exit code 0 when the GPU backend is available. */
  public static void main(String[] args) {
    Status s = status();
    System.out.println(s);
    System.exit(s.available() ? 0 : 1);
  }
}
