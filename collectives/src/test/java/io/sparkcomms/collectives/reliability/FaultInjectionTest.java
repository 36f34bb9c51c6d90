package io.sparkcomms.collectives.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * CI-sized fault injection: kill -9 of a random rank process at a random moment, two trials per
 * collective (allReduce FLAT/TREE/LP, allGather, reduceScatter, allToAll, broadcast, barrier). The
 * standalone runner ({@link FaultInjection#main}) does the same with 100+ trials per collective.
 */
class FaultInjectionTest {
  @Test
  void killedRanksNeverCauseHangsWrongResultsOrLeaks() {
    FaultInjection.Config c = new FaultInjection.Config();
    c.ranks = 3;
    c.trials = 2;
    c.timeoutMs = 2_000;
    c.slackMs = 2_000;
    c.maxKillDelayMs = 250;
    c.maxElems = 1 << 14;
    c.progress = System.out;
    FaultInjection.Summary s = FaultInjection.run(c);
    System.out.println(s.table());
    assertTrue(s.problems().isEmpty(), String.join("\n", s.problems()) + "\n" + s.table());
    assertEquals(2 * FaultInjection.ROWS.size(), s.total(r -> r.faults));
    assertEquals(s.total(r -> r.survivors), s.total(r -> r.survivorsRaised), s.table());
    for (FaultInjection.Row r : s.rows) {
      assertTrue(r.maxRaiseMs <= c.timeoutMs + c.slackMs, r.name + " took " + r.maxRaiseMs + " ms");
    }
  }
}
