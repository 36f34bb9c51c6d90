package io.sparkcomms.collectives.observe;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Pre and post hooks on host communicators of 2 and 3 ranks (threads of this JVM). */
class CallHookTest {
  /** What each call of {@link #callEverything} must look like to a hook: collective, count, async. */
  private record Expected(Collective collective, long count, long bytes, boolean async) {}

  /** One call of each collective; returns what the hooks must see, in order. */
  private static List<Expected> callEverything(Communicator c) {
    int n = c.size();
    int r = c.rank();
    List<Expected> want = new ArrayList<>();
    float[] x = new float[8];
    java.util.Arrays.fill(x, r + 1);
    c.allReduce(HostTensor.of(x), ReduceOp.SUM);
    want.add(new Expected(Collective.ALL_REDUCE, 8, 32, false));
    c.allGather(HostTensor.of(new float[4]), HostTensor.of(new float[4 * n]));
    want.add(new Expected(Collective.ALL_GATHER, 4, 16L * n, false));
    c.reduceScatter(HostTensor.of(new double[3 * n]), HostTensor.of(new double[3]), ReduceOp.MAX);
    want.add(new Expected(Collective.REDUCE_SCATTER, 3, 24L * n, false));
    c.broadcast(HostTensor.of(new int[6]), 0);
    want.add(new Expected(Collective.BROADCAST, 6, 24, false));
    c.allToAll(HostTensor.of(new long[2 * n]), HostTensor.of(new long[2 * n]));
    want.add(new Expected(Collective.ALL_TO_ALL, 2, 16L * n, false));
    c.barrier();
    want.add(new Expected(Collective.BARRIER, 0, 0, false));
    c.allReduceAsync(HostTensor.of(new float[5]), HostTensor.of(new float[5]), ReduceOp.SUM).waitFor();
    want.add(new Expected(Collective.ALL_REDUCE, 5, 20, true));
    assertEquals(8.0 * n * (n + 1) / 2, sum(x), "allReduce result on rank " + r);
    return want;
  }

  private static double sum(float[] x) {
    double s = 0;
    for (float v : x) s += v;
    return s;
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 3})
  void hooksSeeEveryCallOnEveryRank(int n) {
    try (RankGroup g = new RankGroup(n, CommOptions.builder().stagingBytes(1 << 16).build())) {
      List<Recording.Hook> hooks = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        Recording.Hook h = new Recording.Hook();
        g.comm(r).addHook(h);
        hooks.add(h);
      }
      List<List<Expected>> wanted = g.run(r -> callEverything(g.comm(r)));
      for (int r = 0; r < n; r++) {
        List<Expected> want = wanted.get(r);
        List<Recording.Event> ev = hooks.get(r).events();
        assertEquals(2 * want.size(), ev.size(), "rank " + r + ": one pre and one post per call: " + ev);
        long flat = 0;
        for (int i = 0; i < want.size(); i++) {
          Recording.Event pre = ev.get(2 * i);
          Recording.Event post = ev.get(2 * i + 1);
          Expected e = want.get(i);
          assertTrue(pre.pre() && !post.pre(), "rank " + r + " call " + i + ": pre, then post");
          CallInfo info = pre.info();
          assertSame(info, post.result().call(), "post carries the pre info");
          assertEquals(r, info.rank());
          assertEquals(n, info.size());
          assertEquals("host", info.backend());
          assertEquals(i + 1, info.seq(), "rank " + r + ": sequence numbers from 1, in call order");
          assertEquals(e.collective(), info.collective());
          assertEquals(e.collective().apiName(), info.name());
          assertEquals(e.count(), info.count(), "rank " + r + " " + info.name() + " count");
          assertEquals(e.bytes(), info.messageBytes(), "rank " + r + " " + info.name() + " bytes");
          assertEquals(e.async(), info.async());
          CallResult res = post.result();
          assertTrue(res.ok());
          assertNull(res.failure());
          assertEquals(Protocol.FLAT, res.protocol(), "small host calls run FLAT: " + info);
          assertTrue(res.durationNanos() >= 0);
          if (res.protocol() == Protocol.FLAT) flat++;
          if (e.async()) {
            assertFalse(pre.thread().startsWith("sparkcomms-async-rank-"), "an async pre hook runs on the calling thread");
            assertEquals("sparkcomms-async-rank-" + r, post.thread(), "an async call's post hook runs on the async thread");
          } else {
            assertEquals(pre.thread(), post.thread(), "a sync call's hooks run on the calling thread");
            assertFalse(post.thread().startsWith("sparkcomms-async"), post.thread());
          }
        }
        assertEquals(g.comm(r).stats().calls(Protocol.FLAT), flat, "hooks and statistics agree on what ran");
        assertEquals(DataType.INT32, ev.get(6).info().dtype(), "broadcast of an int[]");
      }
    }
  }

  /** The protocol a post hook sees is the one that ran: a forced TREE allReduce runs TREE, its barrier FLAT. */
  @Test void postHookSeesTheProtocolThatRan() {
    try (RankGroup g = new RankGroup(2, CommOptions.builder().algorithm(Algorithm.TREE).stagingBytes(1 << 16).build())) {
      List<Recording.Hook> hooks = g.run(r -> {
        Recording.Hook h = new Recording.Hook();
        g.comm(r).addHook(h);
        g.comm(r).allReduce(HostTensor.of(new float[64]), ReduceOp.SUM);
        g.comm(r).barrier();
        return h;
      });
      for (Recording.Hook h : hooks) {
        List<CallResult> posts = h.posts();
        assertEquals(List.of(Protocol.TREE, Protocol.FLAT), posts.stream().map(CallResult::protocol).toList());
      }
    }
  }

  @Test void aRemovedHookSeesNoLaterCall() {
    try (RankGroup g = new RankGroup(2, CommOptions.builder().stagingBytes(1 << 16).build())) {
      Recording.Hook[] a = {new Recording.Hook(), new Recording.Hook()};
      Recording.Hook[] b = {new Recording.Hook(), new Recording.Hook()};
      g.run(r -> {
        Communicator c = g.comm(r);
        RemovableHandle ha = c.addHook(a[r]);
        try (RemovableHandle hb = c.addHook(b[r])) {
          c.barrier();
          ha.close();
          c.allReduce(HostTensor.of(new float[2]), ReduceOp.SUM);
          ha.remove();  // idempotent
        }
        c.barrier();  // b removed by try-with-resources
        return null;
      });
      for (int r = 0; r < 2; r++) {
        assertEquals(List.of(Collective.BARRIER), a[r].posts().stream().map(p -> p.call().collective()).toList());
        assertEquals(List.of(Collective.BARRIER, Collective.ALL_REDUCE),
            b[r].posts().stream().map(p -> p.call().collective()).toList());
        assertEquals(4, b[r].events().size());
      }
    }
  }

  /** A hook that throws on one rank: every call still completes with the right result, later hooks still run, one warning. */
  @Test void aThrowingHookBreaksNothing() {
    try (RankGroup g = new RankGroup(2, CommOptions.builder().stagingBytes(1 << 16).build());
         Recording.Warnings log = new Recording.Warnings(CallObserver.class)) {
      AtomicInteger thrown = new AtomicInteger();
      CallHook bad = new CallHook() {
        @Override public void preCall(CallInfo call) {
          thrown.incrementAndGet();
          throw new IllegalStateException("pre hook fails on purpose");
        }

        @Override public void postCall(CallResult result) {
          thrown.incrementAndGet();
          throw new AssertionError("post hook fails on purpose");
        }

        @Override public String toString() { return "the failing hook"; }
      };
      g.comm(0).addHook(bad);
      Recording.Hook after = new Recording.Hook();
      g.comm(0).addHook(after);
      List<double[]> out = g.run(r -> {
        double[] x = {r + 1, 10 * (r + 1)};
        for (int i = 0; i < 3; i++) g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        g.comm(r).allReduceAsync(HostTensor.of(x), HostTensor.of(x), ReduceOp.SUM).waitFor();
        return x;
      });
      // (1 + 2) doubled three times, then once more
      for (double[] x : out) assertArrayEquals(new double[] {3 * 8, 30 * 8}, x);
      assertEquals(8, thrown.get(), "the failing hook ran for every call, pre and post");
      assertEquals(8, after.events().size(), "the hook after it still ran");
      assertEquals(1, log.containing("the failing hook").size(), "one warning per hook");
      g.assertStillWorks();
    }
  }

  /** A failed call reaches the post hook with its exception, flight record attached; the protocol is unknown. */
  @Test void postHookSeesTheFailure() {
    try (RankGroup g = new RankGroup(2, CommOptions.builder().stagingBytes(1 << 16).build())) {
      Recording.Hook[] h = {new Recording.Hook(), new Recording.Hook()};
      List<Object> res = g.runCatching(r -> {
        g.comm(r).addHook(h[r]);
        g.comm(r).allReduce(HostTensor.of(new float[r + 1]), ReduceOp.SUM);
        return "no failure";
      });
      for (int r = 0; r < 2; r++) {
        CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(r));
        List<CallResult> posts = h[r].posts();
        assertEquals(1, posts.size());
        assertSame(e, posts.get(0).failure());
        assertFalse(posts.get(0).ok());
        assertNull(posts.get(0).protocol());
        assertEquals(1, e.getSuppressed().length);
        assertInstanceOf(FlightRecordDump.class, e.getSuppressed()[0], "attached before the post hooks run");
      }
      g.assertStillWorks();
    }
  }
}
