package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.lp.Fp8Format;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CommOptionsTest {
  @Test void rcclEnvironmentNamesAreHonored() {
    CommOptions o = CommOptions.builder().applyEnvironment(Map.of(
        "RCCL_LOW_PRECISION_ENABLE", "1",
        "RCCL_LOW_PRECISION_ENABLE_ALLGATHER", "0",
        "RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "128K",
        "RCCL_DDA_ALL_REDUCE_TREE_MAX_BYTES", "33554432",
        "SPARKCOMMS_FP8_FORMAT", "e4m3fnuz",
        "SPARKCOMMS_LP_ONESHOT_MAX_RANKS", "4",
        "SPARKCOMMS_TIMEOUT_MS", "5000")).build();
    assertTrue(o.lowPrecisionEnabled(Collective.ALL_REDUCE));
    assertFalse(o.lowPrecisionEnabled(Collective.ALL_GATHER));
    assertTrue(o.lowPrecisionEnabled(Collective.ALL_TO_ALL));
    assertFalse(o.lowPrecisionEnabled(Collective.BROADCAST));
    assertEquals(128 << 10, o.flatMaxBytes());
    assertEquals(32 << 20, o.treeMaxBytes());
    assertEquals(128 << 10, io.sparkcomms.collectives.algo.Thresholds.flatMaxBytes(o), "explicit value wins over the host default");
    assertEquals(CommOptions.BACKEND_DEFAULT, CommOptions.defaults().flatMaxBytes());
    assertEquals(Fp8Format.E4M3FNUZ, o.fp8Format());
    assertEquals(4, o.lpOneShotMaxRanks());
    assertEquals(CommOptions.BACKEND_DEFAULT, CommOptions.defaults().lpOneShotMaxRanks());
    assertEquals(Duration.ofSeconds(5), o.timeout());
  }

  /** Every knob a backend has a default for stays unset (BACKEND_DEFAULT / null) unless set, so no backend's default is restated here. */
  @Test void backendKnobsAreUnsetUntilSet() {
    CommOptions d = CommOptions.defaults();
    assertEquals(CommOptions.BACKEND_DEFAULT, d.flatMaxBytes());
    assertEquals(CommOptions.BACKEND_DEFAULT, d.treeMaxBytes());
    assertEquals(CommOptions.BACKEND_DEFAULT, d.lpMinBytes());
    assertEquals(CommOptions.BACKEND_DEFAULT, d.lpBlockSize());
    assertEquals(CommOptions.BACKEND_DEFAULT, d.lpOneShotMaxRanks());
    assertEquals(CommOptions.BACKEND_DEFAULT, d.stagingBytes());
    assertEquals(null, d.fp8Format());
    CommOptions s = CommOptions.builder().lpMinBytes(0).lpBlockSize(32).lpOneShotMaxRanks(0).stagingBytes(4096).build();
    assertEquals(0, s.lpMinBytes());
    assertEquals(32, s.lpBlockSize());
    assertEquals(0, s.lpOneShotMaxRanks());
    assertEquals(4096, s.stagingBytes());
    // the host resolves unset knobs to its own defaults, set ones to the value
    assertEquals(io.sparkcomms.collectives.algo.Thresholds.LP_MIN_BYTES, io.sparkcomms.collectives.algo.Thresholds.lpMinBytes(d));
    assertEquals(0, io.sparkcomms.collectives.algo.Thresholds.lpMinBytes(s));
    assertEquals(io.sparkcomms.collectives.algo.Thresholds.STAGING_BYTES, io.sparkcomms.collectives.algo.Thresholds.stagingBytes(d));
    assertEquals(io.sparkcomms.collectives.lp.Fp8Format.E4M3FN, io.sparkcomms.collectives.algo.Thresholds.fp8Format(d));
    assertEquals(0, io.sparkcomms.collectives.algo.Thresholds.lpOneShotMaxRanks(s));
  }

  @Test void perCollectiveSwitchWithoutGlobal() {
    CommOptions o = CommOptions.builder().applyEnvironment(Map.of("RCCL_LOW_PRECISION_ENABLE_ALLREDUCE", "1")).build();
    assertTrue(o.lowPrecisionEnabled(Collective.ALL_REDUCE));
    assertFalse(o.lowPrecisionEnabled(Collective.REDUCE_SCATTER));
  }

  @Test void malformedValuesNameTheVariable() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> CommOptions.builder().applyEnvironment(Map.of("RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "lots")));
    assertTrue(e.getMessage().contains("RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES"));
    assertThrows(IllegalArgumentException.class, () -> CommOptions.builder().applyEnvironment(Map.of("RCCL_LOW_PRECISION_ENABLE", "maybe")));
    for (String[] kv : new String[][] {{"RCCL_LOW_PRECISION_ENABLE_ALLGATHER", "yes"}, {"SPARKCOMMS_VENDOR", "no"},
        {"SPARKCOMMS_STAGING_BYTES", "64KB"}, {"SPARKCOMMS_LP_BLOCK_SIZE", "1.5K"},
        {"SPARKCOMMS_STAGING_BYTES", "1"}, {"SPARKCOMMS_LP_BLOCK_SIZE", "4294967297"},
        {"SPARKCOMMS_TIMEOUT_MS", "5K"}, {"SPARKCOMMS_TIMEOUT_MS", "-5"}, {"SPARKCOMMS_TIMEOUT_MS", "0"}}) {
      IllegalArgumentException err = assertThrows(IllegalArgumentException.class,
          () -> CommOptions.builder().applyEnvironment(Map.of(kv[0], kv[1])), kv[0] + "=" + kv[1]);
      assertTrue(err.getMessage().startsWith(kv[0] + "=" + kv[1] + ": "), err.getMessage());
    }
    assertThrows(IllegalArgumentException.class, () -> CommOptions.builder().flatMaxBytes(1 << 20).treeMaxBytes(1 << 10).build());
    assertThrows(IllegalArgumentException.class, () -> CommOptions.builder().timeout(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> CommOptions.builder().lpOneShotMaxRanks(-1));
  }

  @Test void blankValuesAreNotSet() {
    Map<String, String> env = Map.of("RCCL_LOW_PRECISION_ENABLE", "", "SPARKCOMMS_VENDOR", " ",
        "RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "", "SPARKCOMMS_STAGING_BYTES", "  ", "SPARKCOMMS_TIMEOUT_MS", "");
    assertEquals(CommOptions.defaults().toString(), CommOptions.builder().applyEnvironment(env).build().toString());
    CommOptions off = CommOptions.builder().applyEnvironment(Map.of("SPARKCOMMS_VENDOR", " OFF ", "RCCL_LOW_PRECISION_ENABLE", "On")).build();
    assertFalse(off.vendor());
    assertTrue(off.lowPrecision());
  }

  @Test void sizes() {
    assertEquals(1024, Sizes.parseBytes("1K"));
    assertEquals(64L << 20, Sizes.parseBytes("64M"));
    assertEquals(1L << 30, Sizes.parseBytes("1G"));
    assertEquals(1L << 30, Sizes.parseBytes("1g"));
    assertEquals(512, Sizes.parseBytes("512"));
    assertEquals("64M", Sizes.format(64L << 20));
    assertEquals("1536", Sizes.format(1536));
    for (long v : new long[] {0, 1, 1536, 4096, 64L << 20, 3L << 30, Long.MAX_VALUE}) {
      assertEquals(v, Sizes.parseBytes(Sizes.format(v)), "format then parse " + v);
    }
    for (String bad : new String[] {"-1", "1GiB", "1GB", "64KB", "1T", "", "\u0661"}) {
      assertThrows(IllegalArgumentException.class, () -> Sizes.parseBytes(bad), bad);
    }
  }

  /** Values the native parameter table refuses are refused here too, before any rank starts. */
  @org.junit.jupiter.api.Test
  void rangesMatchTheNativeParameterTable() {
    CommOptions.Builder b = CommOptions.builder();
    for (int bad : new int[] {0, 1, 3, 6, 65540, 1 << 20}) {
      org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> b.lpBlockSize(bad), "lpBlockSize " + bad);
    }
    org.junit.jupiter.api.Assertions.assertEquals(65536, CommOptions.builder().lpBlockSize(65536).build().lpBlockSize());
    org.junit.jupiter.api.Assertions.assertEquals(4, CommOptions.builder().lpBlockSize(4).build().lpBlockSize());
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> b.lpOneShotMaxRanks(65));
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> b.flatMaxBytes((1L << 48) + 1));
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> b.treeMaxBytes(Long.MAX_VALUE));
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> b.lpMinBytes(1L << 50));
    org.junit.jupiter.api.Assertions.assertEquals(1L << 48, CommOptions.builder().flatMaxBytes(1L << 48).build().flatMaxBytes());
  }
}
