package io.sparkcomms.collectives.observe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommOptions;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The two observation settings of {@link CommOptions}: builder, environment, defaults. */
class ObserveOptionsTest {
  @Test void defaultsAndBuilder() {
    CommOptions d = CommOptions.defaults();
    assertFalse(d.nanCheck());
    assertEquals(64, d.flightRecorderSize());
    CommOptions o = CommOptions.builder().nanCheck(true).flightRecorderSize(0).build();
    assertTrue(o.nanCheck());
    assertEquals(0, o.flightRecorderSize());
    assertEquals(o.toString(), o.toBuilder().build().toString(), "toBuilder keeps both");
    assertTrue(o.toString().contains("nanCheck=true") && o.toString().contains("flightRecorderSize=0"), o.toString());
    assertEquals(65536, CommOptions.builder().flightRecorderSize(65536).build().flightRecorderSize());
    assertThrows(IllegalArgumentException.class, () -> CommOptions.builder().flightRecorderSize(-1));
    assertThrows(IllegalArgumentException.class, () -> CommOptions.builder().flightRecorderSize(65537));
    assertEquals(d.agreedSettings(), o.agreedSettings(), "ranks may differ in both");
  }

  @Test void environment() {
    CommOptions o = CommOptions.builder().applyEnvironment(Map.of("SPARKCOMMS_NAN_CHECK", "on",
        "SPARKCOMMS_FLIGHT_RECORDER_SIZE", "1K")).build();
    assertTrue(o.nanCheck());
    assertEquals(1024, o.flightRecorderSize());
    CommOptions blank = CommOptions.builder().applyEnvironment(Map.of("SPARKCOMMS_NAN_CHECK", " ",
        "SPARKCOMMS_FLIGHT_RECORDER_SIZE", "")).build();
    assertEquals(CommOptions.defaults().toString(), blank.toString());
    for (String[] kv : new String[][] {{"SPARKCOMMS_NAN_CHECK", "yes"}, {"SPARKCOMMS_FLIGHT_RECORDER_SIZE", "65537"},
        {"SPARKCOMMS_FLIGHT_RECORDER_SIZE", "-1"}, {"SPARKCOMMS_FLIGHT_RECORDER_SIZE", "8G"}}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> CommOptions.builder().applyEnvironment(Map.of(kv[0], kv[1])), kv[0] + "=" + kv[1]);
      assertTrue(e.getMessage().startsWith(kv[0] + "=" + kv[1] + ": "), e.getMessage());
    }
  }
}
